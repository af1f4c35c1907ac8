/*
 * danmaku.js: browser client for the danmaku broadcast service.
 * Plain JavaScript, no build step, no dependencies. Load it with
 * <script src="/danmaku.js"></script>; it defines window.DanmakuClient.
 *
 *   const client = new DanmakuClient({
 *     room: "lobby",
 *     onMessage(msg, meta) { show(msg.name, msg.content, meta.replay) },
 *                                    // msg {id, uid, name, content, ts, pos}, meta {replay, room}
 *     onState(state, info) { ... },  // "connecting" | "open" | "reconnecting" | "closed"
 *     onWelcome(w) { ... },          // {connId, room, online, heartbeatMs, epoch, pos, recovered}
 *     onOnline(n, room) { ... },     // the room's viewer count changed
 *     onGap(info) { ... },           // comments may have been missed (see below)
 *     onDelete(ids, room) { ... },   // a moderator deleted these comments
 *     onUser(msgs) { ... },          // notices to this user: [{id, ts, content?, data?}]
 *     onBroadcast(msgs) { ... },     // notices to every viewer, same shape
 *     onSkipped(n, room, total) { ... }, // a thinned frame left out n normal comments
 *     onDensity(max, room) { ... },  // the density tier the server serves (0: every comment)
 *     onRoomState(state, room) { ... }, // the room's modes: {ver, slowSeconds?, membersOnly?, uniqueSeconds?}
 *     onPin(pin, room) { ... },      // the room's pinned message {id, name, content, until, ...}, or null
 *   });
 *   client.connect();
 *   client.join("another-room");     // switch; throws on an invalid room id
 *   client.subscribe("news");        // one more room on the same socket
 *   client.unsubscribe("news");
 *   client.setDensity(30);           // at most 30 normal comments a second per room; 0: all
 *   client.send("hello", {userId: 42, userName: "Ann"})
 *     .then(() => client.online())
 *     .then(n => console.log(n), e => console.log(e.code, e.message));
 *   client.close();
 *
 * What it takes care of (docs/client.md says more):
 *  - heartbeat: {"op":"ping"} heartbeatMs (of the welcome) after the last
 *    one or its pong; a server silent for two periods plus 5 s means
 *    reconnect;
 *  - reconnect with exponential backoff and full jitter;
 *  - transports: a WebSocket to /ws, or, when it cannot be opened (a
 *    proxy that breaks WebSockets), server-sent events from /sse with the
 *    same frames, the client's frames posted to /sse?stream=ID
 *    (opts.transport "auto", the default; "websocket" or "sse" force one).
 *    client.transport and onState("open", {transport}) say which is used;
 *  - several rooms: join(room) switches (the socket then holds that room
 *    only), subscribe(room) adds one, unsubscribe(room) leaves one (ops
 *    "sub", "unsub"). The first room (opts.room, or the last join) is the
 *    default of send() and online(); every callback gets the room. A room
 *    the server refuses (forbidden, too_many_rooms) or a ban takes away is
 *    dropped, with onError(err) naming it in err.room;
 *  - resume: per room, the timeline's epoch and the last position received
 *    (position(room)); every reconnect asks for what each room missed
 *    (?since=POS&epoch=EPOCH for the first room, since.ROOM/epoch.ROOM for
 *    the others), and a join or subscribe of a room held before carries
 *    "since" and "epoch" too;
 *  - replay: frames of stored messages (replay:true: history after a join,
 *    what a resume missed) reach onMessage at once, in order, after the
 *    live messages still waiting, with meta.replay true; live messages are
 *    paced over the window following their own timestamps;
 *  - gaps: onGap({room, reason, epoch, pos, serverEpoch, serverPos}) when
 *    comments may be lost for good (reason "resume": the welcome says
 *    recovered:false; "epoch": a live frame starts a new epoch); the client
 *    goes on from the server's position;
 *  - duplicates: a message id already shown is dropped (bounded memory);
 *  - moderation: a del frame calls onDelete(ids, room) after dropping those
 *    comments from the pacing queue (their ids count as seen); a close 4003
 *    (banned from the connection's last room) is not retried: state
 *    "closed" with {code: 4003, room}; join() of another room connects
 *    again;
 *  - density: opts.density (or setDensity(n) at any time, which also
 *    tells the open socket: {"op":"density","max":n}) asks the server for
 *    at most n normal comments a second per room; high-priority comments
 *    (msg.priority === 1) and the viewer's own (its uid) always come. A
 *    thinned frame's "skipped" (normal comments left out) calls
 *    onSkipped(n, room, total), total being the room's sum so far
 *    (skipped(room)); the server's answer and each welcome name the tier
 *    served, onDensity(max, room);
 *  - notices: a `user` frame (notices to the user of `uid`/the token, on
 *    every tab, whatever the rooms) calls onUser(msgs), an `all` frame (a
 *    broadcast to every viewer) onBroadcast(msgs); each notice is {id, ts}
 *    with `content`, `data` (a JSON object) or both. They are not paced,
 *    have no position and are not replayed after a reconnect; an id
 *    already handed over is dropped;
 *  - room modes: the welcome's state and each state frame call
 *    onRoomState(state, room) when the version is newer than the one held
 *    (roomState(room) returns it); a send the room's modes refuse rejects
 *    with err.code slow_mode (err.retryAfterMs), members_only or
 *    duplicate_content;
 *  - pins: the welcome's pin and the pin/unpin frames call onPin(pin, room),
 *    and onPin(null, room) when the pin is taken away or its until passes
 *    (pinned(room) returns the pin in force).
 */
(function (global) {
  "use strict";

  var DEFAULTS = {
    url: "",              // WebSocket URL; "" = same origin + "/ws"
    sseUrl: "",           // SSE URL; "" = url with ws(s) -> http(s), /ws -> /sse
    transport: "auto",    // "auto": WebSocket, SSE when it cannot open; "websocket"; "sse"
    baseUrl: "",          // HTTP API base; "" = same origin
    room: "",
    uid: "",              // optional numeric user id, sent as ?uid=
    token: "",            // optional JWT: ?token= on /ws, Authorization: Bearer on send
    sendRetries: 3,       // send() retries after 503 or no answer, same msgIds
    paceMs: 1000,         // longest stretch a batch is replayed over
    seenIds: 4096,        // message ids remembered for duplicate suppression
    backoffMinMs: 500,
    backoffMaxMs: 15000,
    heartbeatMs: 25000,   // until the welcome frame says otherwise
    density: 0,           // at most this many normal comments a second per room; 0: every one
    sendTimeoutMs: 10000,
    onMessage: null,
    onBatch: null,        // raw batch before pacing: (room, msgs)
    onState: null,
    onWelcome: null,
    onOnline: null,       // (online, room): the room's viewer count changed
    onGap: null,          // ({room, reason, epoch, pos, serverEpoch, serverPos})
    onDelete: null,       // (ids, room): comments a moderator deleted
    onUser: null,         // (msgs): notices to this user
    onBroadcast: null,    // (msgs): notices to every viewer
    onSkipped: null,      // (n, room, total): a thinned frame left out n normal comments
    onDensity: null,      // (max, room): the density tier served (0: every comment)
    onRoomState: null,    // (state, room): the room's modes changed
    onPin: null,          // (pin|null, room): the room's pinned message
    onError: null
  };

  // Rooms whose timeline position is kept; the least recently used is
  // forgotten beyond this (a later join of it starts fresh).
  var TIMELINE_ROOMS = 64;
  // Close code of a viewer banned from its room: reconnecting would be
  // refused the same way.
  var CLOSE_BANNED = 4003;
  // readyState of an open connection (WebSocket.OPEN; SSEConn uses it too).
  var OPEN = 1;

  /** Bounded set of ids: remembers the last `cap` ids added. */
  function SeenSet(cap) {
    this.cap = Math.max(1, cap | 0);
    this.ring = new Array(this.cap);
    this.pos = 0;
    this.set = new Set();
  }
  SeenSet.prototype.add = function (id) {
    if (this.set.has(id)) return false;
    var old = this.ring[this.pos];
    if (old !== undefined) this.set.delete(old);
    this.ring[this.pos] = id;
    this.pos = (this.pos + 1) % this.cap;
    this.set.add(id);
    return true;
  };
  SeenSet.prototype.has = function (id) { return this.set.has(id); };

  /**
   * SSEConn is the SSE transport behind the WebSocket interface the client
   * uses (readyState, send, close, onopen, onmessage, onclose): it reads
   * the comet's frames from an EventSource on /sse and posts the client's
   * frames to /sse?stream=ID. It opens when the first event names the
   * stream, and closes for good at the first error (the client reconnects
   * with since/epoch itself; EventSource's own retry would not resume).
   */
  function SSEConn(url) {
    var self = this;
    this.url = url.split("?")[0];
    this.readyState = 0;
    this.stream = "";
    this.closeCode = 1006;
    this.closeReason = "";
    this.es = new EventSource(url);
    this.es.onmessage = function (ev) {
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f && f.op === "stream" && !self.stream) {
        self.stream = f.id;
        self.readyState = 1;
        if (self.onopen) self.onopen();
      } else if (f && f.op === "close") {
        self.closeCode = f.code;
        self.closeReason = f.reason || "";
      } else if (self.readyState === 1 && self.onmessage) {
        self.onmessage({ data: ev.data });
      }
    };
    this.es.onerror = function () { self._end(self.closeCode, self.closeReason); };
  }
  SSEConn.prototype.send = function (data) {
    if (this.readyState !== 1) return;
    var self = this;
    fetch(this.url + "?stream=" + encodeURIComponent(this.stream), {
      method: "POST", headers: { "Content-Type": "application/json" }, body: data
    }).then(function (resp) {
      if (resp.status === 404) self._end(1006, "stream ended");
    }, function () { /* the stream's own error follows */ });
  };
  SSEConn.prototype.close = function (code, reason) { this._end(code || 1000, reason || ""); };
  SSEConn.prototype._end = function (code, reason) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.es.close();
    var self = this;
    setTimeout(function () { if (self.onclose) self.onclose({ code: code, reason: reason }); }, 0);
  };

  /** DanmakuClient: one WebSocket to the comet, for one room or several. */
  function DanmakuClient(options) {
    this.opts = Object.assign({}, DEFAULTS, options || {});
    this.room = this.opts.room;
    this.extra = [];           // rooms held besides this.room, in order
    this.metas = new Map();    // room -> frozen onMessage metas {replay, room}
    this.joined = "";          // room of the last welcome
    this.state = "closed";
    this.ws = null;            // the connection: a WebSocket or an SSEConn
    this.transport = "";       // "websocket" or "sse" once a connection opened
    this.wsOpened = false;     // a WebSocket opened once: no fallback to SSE
    this.useSSE = this.opts.transport === "sse";
    this.connId = "";
    this.onlineCount = 0;
    this.heartbeatMs = this.opts.heartbeatMs;
    this.attempt = 0;          // failed connects in a row (backoff exponent)
    this.wanted = false;       // connect() called and close() not yet
    this.seen = new SeenSet(this.opts.seenIds);
    this.seenNotices = new SeenSet(this.opts.seenIds);
    this.timeline = new Map(); // room -> {epoch, pos}, least recently used first
    this.asked = new Map();    // room -> {epoch, pos} of a resume not yet answered
    this.states = new Map();   // room -> its modes, the newest version seen
    this.pins = new Map();     // room -> {pin, ver, timer}: the pin in force
    this.queue = [];           // paced messages, ordered by due time
    this.playTimer = null;
    this.lastDue = 0;          // due time of the last queued message
    this.pingTimer = null;
    this.retryTimer = null;
    this.lastHeard = 0;
    this.skippedBy = new Map(); // room -> normal comments the density tier left out
    this.socketSend = false;   // the connection's welcome said send:true
    this.sends = new Map();    // ref -> {resolve, reject, timer} of a send on the socket
    this.nextRef = 0;
  }

  DanmakuClient.prototype._emit = function (name) {
    var fn = this.opts[name];
    if (typeof fn !== "function") return;
    try {
      fn.apply(this, Array.prototype.slice.call(arguments, 1));
    } catch (e) {
      if (global.console) console.error("danmaku: " + name + " handler:", e);
    }
  };

  DanmakuClient.prototype._setState = function (state, info) {
    if (this.state === state && !info) return;
    this.state = state;
    this._emit("onState", state, info || {});
  };

  /** The WebSocket URL without query, and the SSE URL of the same comet. */
  DanmakuClient.prototype._endpoint = function (sse) {
    var u = this.opts.url;
    if (!u) {
      var loc = global.location;
      u = (loc.protocol === "https:" ? "wss://" : "ws://") + loc.host + "/ws";
    }
    if (!sse) return u;
    if (this.opts.sseUrl) return this.opts.sseUrl;
    return u.replace(/^ws/, "http").replace(/\/ws(\?|$)/, "/sse$1");
  };

  DanmakuClient.prototype._wsURL = function (sse) {
    var u = this._endpoint(sse);
    var q = [], rooms = this._rooms();
    for (var i = 0; i < rooms.length; i++) {
      q.push("room=" + encodeURIComponent(rooms[i]));
      var r = this._resume(rooms[i]), key = i ? "." + encodeURIComponent(rooms[i]) : "";
      if (r) q.push("since" + key + "=" + r.pos, "epoch" + key + "=" + encodeURIComponent(r.epoch));
    }
    if (this.opts.uid !== "" && this.opts.uid != null) q.push("uid=" + encodeURIComponent(this.opts.uid));
    if (this.opts.density > 0) q.push("density=" + Math.floor(this.opts.density));
    if (this.opts.token) q.push("token=" + encodeURIComponent(this.opts.token));
    return q.length ? u + (u.indexOf("?") < 0 ? "?" : "&") + q.join("&") : u;
  };

  /** Opens the connection (and keeps it open until close()). */
  DanmakuClient.prototype.connect = function () {
    this.wanted = true;
    if (this.ws) return this;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this._setState(this.attempt ? "reconnecting" : "connecting", { attempt: this.attempt });
    var ws, sse = this.useSSE;
    try {
      ws = sse ? new SSEConn(this._wsURL(true)) : new WebSocket(this._wsURL());
    } catch (e) {
      if (!sse && this._fallBack()) return this.connect();
      this._emit("onError", e);
      this._scheduleReconnect(0, "bad url");
      return this;
    }
    this.ws = ws;
    var urlRooms = this._rooms();
    var self = this;
    var opened = false;
    ws.onopen = function () {
      opened = true;
      self.transport = sse ? "sse" : "websocket";
      if (!sse) self.wsOpened = true;
      self.lastHeard = Date.now();
      self._startHeartbeat();
      self._catchUpRooms(ws, urlRooms);
    };
    ws.onmessage = function (ev) {
      if (self.ws !== ws) return;
      self.lastHeard = Date.now();
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      self._onFrame(f);
    };
    ws.onclose = function (ev) {
      if (self.ws !== ws) return;
      self.ws = null;
      self._dropSends();
      self._stopHeartbeat();
      if (!self.wanted) {
        self._setState("closed", { code: ev.code, reason: ev.reason });
        return;
      }
      if (ev.code === CLOSE_BANNED) {
        self._setState("closed", { code: ev.code, reason: ev.reason, room: self.room });
        return;
      }
      // A WebSocket that never opened, on a page where none ever did: try
      // SSE at once (a proxy that breaks WebSockets stays in the way).
      if (!sse && !opened && self._fallBack()) {
        self.connect();
        return;
      }
      self._scheduleReconnect(ev.code, ev.reason);
    };
    ws.onerror = function () { /* onclose follows and decides */ };
    return this;
  };

  /**
   * Switches to SSE for this and every later connection when the
   * transport is "auto" and no WebSocket ever opened; reports whether it
   * did.
   */
  DanmakuClient.prototype._fallBack = function () {
    if (this.opts.transport !== "auto" || this.useSSE || this.wsOpened || typeof EventSource !== "function") return false;
    this.useSSE = true;
    return true;
  };

  /** The rooms the client holds: the first room, then the others. */
  DanmakuClient.prototype._rooms = function () {
    return this.room ? [this.room].concat(this.extra) : this.extra.slice();
  };

  DanmakuClient.prototype._holds = function (room) {
    return !!room && (room === this.room || this.extra.indexOf(room) >= 0);
  };

  /**
   * join(), subscribe() or unsubscribe() while the socket was opening: the
   * URL named the rooms held then; ask for the difference.
   */
  DanmakuClient.prototype._catchUpRooms = function (ws, urlRooms) {
    var now = this._rooms(), i;
    var send = function (f) { ws.send(JSON.stringify(f)); };
    if (now.length && now[0] !== urlRooms[0]) {
      send(this._joinFrame(now[0]));
      urlRooms = [now[0]];
    }
    for (i = 0; i < urlRooms.length; i++) {
      if (now.indexOf(urlRooms[i]) < 0) send({ op: "unsub", room: urlRooms[i] });
    }
    for (i = 0; i < now.length; i++) {
      if (urlRooms.indexOf(now[i]) < 0) send(this._joinFrame(now[i], "sub"));
    }
  };

  /** Forgets room (left, refused, or banned), and its comments still queued. */
  DanmakuClient.prototype._drop = function (room) {
    var i = this.extra.indexOf(room);
    if (i >= 0) this.extra.splice(i, 1);
    else if (room === this.room) this.room = this.extra.shift() || "";
    this.queue = this.queue.filter(function (q) { return q.room !== room; });
  };

  /** The meta of room's messages for onMessage: {replay, room}, one object each. */
  DanmakuClient.prototype._meta = function (room, replay) {
    var m = this.metas.get(room);
    if (!m) {
      m = [Object.freeze({ replay: false, room: room }), Object.freeze({ replay: true, room: room })];
      this.metas.set(room, m);
      if (this.metas.size > TIMELINE_ROOMS) this.metas.delete(this.metas.keys().next().value);
    }
    return m[replay ? 1 : 0];
  };

  DanmakuClient.prototype._onFrame = function (f) {
    switch (f.op) {
      case "welcome":
        this.attempt = 0;
        this.socketSend = f.send === true && this.transport === "websocket";
        this.joined = f.room;
        this.connId = f.connId;
        if (f.room === this.room || !this.room) this.onlineCount = f.online;
        if (f.heartbeatMs > 0 && f.heartbeatMs !== this.heartbeatMs) {
          this.heartbeatMs = f.heartbeatMs;
          this._startHeartbeat();
        }
        var gap = this._welcomed(f);
        this._setState("open", { room: f.room, online: f.online, connId: f.connId, transport: this.transport });
        if (f.state) this._roomState(f.room, f.state);
        this._pinned(f.room, f.pin || null, f.pin ? f.pin.ver : 0, !f.pin);
        this._emit("onWelcome", f);
        this._emit("onDensity", f.density || 0, f.room);
        if (gap) this._emit("onGap", gap);
        break;
      case "msgs":
        // After a room was left its last batch may still arrive.
        if (!this._holds(f.room) || !Array.isArray(f.msgs)) return;
        var jump = this._advance(f);
        if (jump) this._emit("onGap", jump);
        this._emit("onBatch", f.room, f.msgs, this._meta(f.room, f.replay === true));
        if (typeof f.skipped === "number" && f.skipped > 0) {
          var total = (this.skippedBy.get(f.room) || 0) + f.skipped;
          this.skippedBy.set(f.room, total);
          this._emit("onSkipped", f.skipped, f.room, total);
        }
        if (f.replay === true) this._replay(f.msgs, f.room);
        else this._pace(f.msgs, f.room);
        break;
      case "del":
        if (!this._holds(f.room) || !Array.isArray(f.ids)) return;
        this._deleted(f.ids);
        this._emit("onDelete", f.ids.slice(), f.room);
        break;
      case "user":
      case "all":
        if (!Array.isArray(f.msgs)) return;
        var fresh = f.msgs.filter(function (n) {
          return n && typeof n.id === "string" && this.seenNotices.add(n.id);
        }, this);
        if (fresh.length) this._emit(f.op === "user" ? "onUser" : "onBroadcast", fresh);
        break;
      case "state":
        if (this._holds(f.room) && f.state) this._roomState(f.room, f.state);
        break;
      case "pin":
      case "unpin":
        if (!this._holds(f.room) || !f.pin || typeof f.pin.ver !== "number") return;
        var cur = this.pins.get(f.room);
        if (f.op === "pin") this._pinned(f.room, f.pin, f.pin.ver, false);
        else if (cur && cur.pin && cur.pin.id === f.pin.id) this._pinned(f.room, null, f.pin.ver, false);
        break;
      case "online":
        if (!this._holds(f.room) || typeof f.online !== "number") return;
        if (f.room === this.room) this.onlineCount = f.online;
        this._emit("onOnline", f.online, f.room);
        break;
      case "density":
        if (typeof f.max !== "number") return;
        if (f.room) this._emit("onDensity", f.max, f.room);
        else this._rooms().forEach(function (r) { this._emit("onDensity", f.max, r); }, this);
        break;
      case "pong":
        if (this.pingTimer) this._beatIn(Math.max(1000, this.heartbeatMs));
        break;
      case "unsubscribed":
        break;
      case "ack":
        this._answered(f, null);
        break;
      case "error":
        if (f.ref && this._answered(f, f)) break;
        this._refused(f);
        this._emit("onError", Object.assign(new Error(f.message || f.code), { code: f.code, room: f.room || "" }));
        break;
    }
  };

  /**
   * Follows what a refusal leaves: a join refused for a bad room id keeps
   * the viewer in its room; a room refused (forbidden, too many) or taken
   * away by a ban is not held. The last room's ban closes the socket (4003)
   * and stays the client's room, for the "closed" state to name it.
   */
  DanmakuClient.prototype._refused = function (f) {
    if (f.code === "bad_room" && this.joined && this.room !== this.joined) {
      this.room = this.joined;
      this._setState("open", { room: this.room });
      return;
    }
    var away = f.code === "banned" || f.code === "forbidden" || f.code === "too_many_rooms";
    if (!away || !f.room || !this._holds(f.room)) return;
    if (f.room === this.room && (!this.extra.length || f.code === "forbidden")) return;
    this._drop(f.room);
  };

  /** Keeps a room's modes when newer than those held and calls onRoomState. */
  DanmakuClient.prototype._roomState = function (room, st) {
    var held = this.states.get(room);
    if (held && held.ver >= st.ver) return;
    this.states.set(room, st);
    this._emit("onRoomState", Object.assign({}, st), room);
  };

  /** The modes of room (default: the first room) as last told, or null. */
  DanmakuClient.prototype.roomState = function (room) {
    return this.states.get(room === undefined ? this.room : room) || null;
  };

  /**
   * Makes pin (null: none) the room's pin when ver is newer than the held
   * one's (a welcome without a pin, "fromWelcome", ends a held pin: it ended
   * or was taken away while the client was away), calls onPin on a change,
   * and ends the pin by itself at its until.
   */
  DanmakuClient.prototype._pinned = function (room, pin, ver, fromWelcome) {
    var cur = this.pins.get(room);
    if (cur && !fromWelcome && ver <= cur.ver) return;
    if (cur && cur.timer) clearTimeout(cur.timer);
    if (pin && pin.until <= Date.now()) pin = null;
    var changed = (cur && cur.pin ? cur.pin.id : "") !== (pin ? pin.id : "");
    var next = { pin: pin, ver: Math.max(ver, cur ? cur.ver : 0), timer: null };
    if (pin) {
      next.timer = setTimeout(function () {
        if (this.pins.get(room) === next) { next.pin = null; this._emit("onPin", null, room); }
      }.bind(this), Math.min(pin.until - Date.now(), 2147483647));
    }
    this.pins.set(room, next);
    if (changed) this._emit("onPin", pin ? Object.assign({}, pin) : null, room);
  };

  /** The pin in force in room (default: the first room), or null. */
  DanmakuClient.prototype.pinned = function (room) {
    var p = this.pins.get(room === undefined ? this.room : room);
    return p && p.pin ? p.pin : null;
  };

  /** The room's timeline as last seen: {epoch, pos}, or null. */
  DanmakuClient.prototype.position = function (room) {
    var tl = this.timeline.get(room === undefined ? this.room : room);
    return tl ? { epoch: tl.epoch, pos: tl.pos } : null;
  };

  DanmakuClient.prototype._remember = function (room, epoch, pos) {
    this.timeline.delete(room);
    this.timeline.set(room, { epoch: epoch, pos: pos });
    if (this.timeline.size > TIMELINE_ROOMS) this.timeline.delete(this.timeline.keys().next().value);
  };

  /**
   * Where a (re)join of room resumes from, or null for a fresh join (the
   * room was never joined, or the server keeps no timelines). A room
   * whose welcome named no epoch yet (it had no messages) resumes from
   * position 0 of no epoch: the server then replays its timeline from the
   * start. Records the attempt, so the welcome can tell a failed resume.
   */
  DanmakuClient.prototype._resume = function (room) {
    var tl = this.timeline.get(room);
    if (!tl) {
      this.asked.delete(room);
      return null;
    }
    this.asked.set(room, { epoch: tl.epoch, pos: tl.pos });
    return tl;
  };

  DanmakuClient.prototype._joinFrame = function (room, op) {
    var f = { op: op || "join", room: room };
    var r = this._resume(room);
    if (r) {
      f.since = r.pos;
      f.epoch = r.epoch;
    }
    return f;
  };

  /**
   * Takes the timeline from a welcome. A recovered resume keeps the
   * client's position (the replay that follows moves it on; a resume from
   * no epoch takes the server's); otherwise the room starts at the
   * welcome's position, and a resume that was refused is returned as the
   * gap to report. A welcome without an epoch field comes from a server
   * that keeps no timelines: nothing is remembered.
   */
  DanmakuClient.prototype._welcomed = function (w) {
    var asked = this.asked.get(w.room);
    this.asked.delete(w.room);
    if (typeof w.epoch !== "string") return null;
    var tl = this.timeline.get(w.room);
    var pos = typeof w.pos === "number" ? w.pos : 0;
    if (w.recovered === true && tl && (tl.epoch === w.epoch || !tl.epoch)) {
      this._remember(w.room, w.epoch, tl.pos);
      return null;
    }
    this._remember(w.room, w.epoch, pos);
    if (w.recovered !== false || !asked) return null;
    return { room: w.room, reason: "resume", epoch: asked.epoch, pos: asked.pos, serverEpoch: w.epoch, serverPos: pos };
  };

  /**
   * Moves the room's position to the frame's last message. A frame of
   * another epoch than the one the client holds means the room's history
   * was lost: it is returned as the gap to report, and the new epoch is
   * followed from there.
   */
  DanmakuClient.prototype._advance = function (f) {
    if (typeof f.epoch !== "string" || !f.epoch) return null;
    // A thinned frame's "through" is the last position its "skipped"
    // counted: a resume goes on after it, so those are not counted again.
    var top = typeof f.through === "number" ? f.through : 0;
    for (var i = 0; i < f.msgs.length; i++) {
      var p = f.msgs[i] && f.msgs[i].pos;
      if (typeof p === "number" && p > top) top = p;
    }
    var tl = this.timeline.get(f.room);
    if (tl && tl.epoch === f.epoch) {
      if (top > tl.pos) this._remember(f.room, f.epoch, top);
      return null;
    }
    this._remember(f.room, f.epoch, top);
    if (!tl || !tl.epoch) return null;
    return { room: f.room, reason: "epoch", epoch: tl.epoch, pos: tl.pos, serverEpoch: f.epoch, serverPos: top };
  };

  /**
   * Hands a replayed batch to the app at once: live messages still waiting
   * to be paced are older and go first, then the batch's new messages in
   * timeline order.
   */
  DanmakuClient.prototype._replay = function (msgs, room) {
    var fresh = this._fresh(msgs);
    if (!fresh.length) return;
    clearTimeout(this.playTimer);
    this.playTimer = null;
    while (this.queue.length) {
      var q = this.queue.shift();
      this._emit("onMessage", q.msg, this._meta(q.room, false));
    }
    this.lastDue = 0;
    fresh.sort(function (a, b) {
      return (typeof a.pos === "number" && typeof b.pos === "number") ? a.pos - b.pos : a.ts - b.ts;
    });
    var meta = this._meta(room, true);
    for (var i = 0; i < fresh.length; i++) this._emit("onMessage", fresh[i], meta);
  };

  /**
   * Forgets deleted comments that are still waiting to be paced, and
   * marks their ids seen so that no later frame shows them.
   */
  DanmakuClient.prototype._deleted = function (ids) {
    var gone = new Set(ids);
    this.queue = this.queue.filter(function (q) { return !gone.has(q.msg.id); });
    for (var i = 0; i < ids.length; i++) this.seen.add(ids[i]);
  };

  /** The messages of msgs whose id was not seen before (and marks them seen). */
  DanmakuClient.prototype._fresh = function (msgs) {
    var fresh = [];
    for (var i = 0; i < msgs.length; i++) {
      var m = msgs[i];
      if (m && m.id && this.seen.add(m.id)) fresh.push(m);
    }
    return fresh;
  };

  /**
   * Queues a batch for display. Message i is due at
   *   start + (ts_i - ts_first) * scale
   * where scale squeezes the batch's time span into paceMs when it is
   * longer (a backlog after a reconnect), and start is now or just after
   * the previous batch when that is still playing; a capped tier's frame
   * of a second's comments thus plays over that second. High-priority
   * comments are due at once. One timer drives the whole queue.
   */
  DanmakuClient.prototype._pace = function (msgs, room) {
    var fresh = this._fresh(msgs);
    if (!fresh.length) return;
    fresh.sort(function (a, b) { return a.ts - b.ts; });
    var first = fresh[0].ts || 0, last = fresh[fresh.length - 1].ts || first;
    var span = Math.max(0, last - first);
    var scale = span > this.opts.paceMs ? this.opts.paceMs / span : 1;
    var now = Date.now();
    // Keep order across batches, but never let the queue run more than
    // paceMs behind: a backlog is played faster, not later and later.
    var start = Math.max(now, Math.min(this.lastDue, now + this.opts.paceMs));
    for (var j = 0; j < fresh.length; j++) {
      // A high-priority comment is shown at once, not after the older
      // comments a capped tier's frame holds (up to a second of them).
      if (fresh[j].priority === 1) {
        this.queue.push({ due: now, msg: fresh[j], room: room });
        continue;
      }
      var due = start + ((fresh[j].ts || first) - first) * scale;
      this.queue.push({ due: due, msg: fresh[j], room: room });
      if (due > this.lastDue) this.lastDue = due;
    }
    this.queue.sort(function (a, b) { return a.due - b.due; });
    this._play();
  };

  DanmakuClient.prototype._play = function () {
    if (this.playTimer) return;
    var now = Date.now();
    while (this.queue.length && this.queue[0].due <= now + 4) {
      var q = this.queue.shift();
      this._emit("onMessage", q.msg, this._meta(q.room, false));
    }
    if (!this.queue.length) return;
    var self = this;
    this.playTimer = setTimeout(function () {
      self.playTimer = null;
      self._play();
    }, Math.max(0, this.queue[0].due - now));
  };

  // The next heartbeat goes heartbeatMs after the last one, or after the
  // pong that answered it: the comet writes the pongs of all its viewers
  // together a few times a second, so heartbeats timed from them reach it
  // together too, and one wake-up serves many.
  DanmakuClient.prototype._startHeartbeat = function () {
    this._stopHeartbeat();
    this._beatIn(Math.max(1000, this.heartbeatMs));
  };

  DanmakuClient.prototype._beatIn = function (ms) {
    clearTimeout(this.pingTimer);
    var self = this;
    this.pingTimer = setTimeout(function () { self._beat(); }, ms);
  };

  DanmakuClient.prototype._beat = function () {
    var every = Math.max(1000, this.heartbeatMs);
    var ws = this.ws;
    this._beatIn(every);
    if (!ws || ws.readyState !== OPEN) return;
    // Two missed heartbeats: the path is dead even if TCP has not noticed.
    if (Date.now() - this.lastHeard > 2 * every + 5000) {
      ws.close(4000, "heartbeat timeout");
      return;
    }
    ws.send('{"op":"ping"}');
  };

  DanmakuClient.prototype._stopHeartbeat = function () {
    clearTimeout(this.pingTimer);
    this.pingTimer = null;
  };

  /**
   * Reconnects after min(max, min*2^attempt) with full jitter. A server
   * going away (1001) is expected to be met elsewhere at once, so the
   * first retry after it only waits a short random moment.
   */
  DanmakuClient.prototype._scheduleReconnect = function (code, reason) {
    var o = this.opts;
    var ceil = Math.min(o.backoffMaxMs, o.backoffMinMs * Math.pow(2, this.attempt));
    if (code === 1001 && this.attempt === 0) ceil = o.backoffMinMs;
    var delay = Math.round(ceil / 2 + Math.random() * ceil / 2);
    this.attempt++;
    this._setState("reconnecting", { code: code, reason: reason, delayMs: delay, attempt: this.attempt });
    var self = this;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(function () {
      self.retryTimer = null;
      if (self.wanted) self.connect();
    }, delay);
  };

  var ROOM_ID = /^[A-Za-z0-9_.\-]{1,64}$/;

  function checkRoom(room) {
    if (typeof room !== "string" || !ROOM_ID.test(room)) {
      throw Object.assign(new Error("room: must be 1 to 64 of A-Z a-z 0-9 _ . -"),
        { code: "invalid_argument", field: "room" });
    }
  }

  /** Sends f now when the socket is open, else (re)connects: the URL says it. */
  DanmakuClient.prototype._sendOrConnect = function (f) {
    if (this.ws && this.ws.readyState === OPEN) {
      this.ws.send(JSON.stringify(f));
    } else if (this.wanted && !this.ws) {
      this.attempt = 0;
      this.connect();
    }
  };

  /**
   * Switches to room, leaving every other room; the next welcome confirms
   * it. A room the client was in before is resumed where it left it
   * (since/epoch). An invalid room id throws an Error (code
   * "invalid_argument", field "room") and changes nothing: the client
   * stays in its rooms.
   */
  DanmakuClient.prototype.join = function (room) {
    checkRoom(room);
    if (room === this.room && !this.extra.length) return this;
    this.room = room;
    this.extra = [];
    this.queue = [];
    this.lastDue = 0;
    if (this.ws && this.ws.readyState === OPEN) this._setState("connecting", { room: room });
    this._sendOrConnect(this._joinFrame(room));
    return this;
  };

  /**
   * Adds room to the rooms the socket holds (the first room when it holds
   * none); its welcome and history, or the resume of a room held before,
   * follow. Throws like join() for an invalid room id.
   */
  DanmakuClient.prototype.subscribe = function (room) {
    checkRoom(room);
    if (this._holds(room)) return this;
    if (this.room) this.extra.push(room);
    else this.room = room;
    this._sendOrConnect(this._joinFrame(room, "sub"));
    return this;
  };

  /** Leaves room (its comments still being paced are dropped). */
  DanmakuClient.prototype.unsubscribe = function (room) {
    if (!this._holds(room)) return this;
    this._drop(room);
    if (this.ws && this.ws.readyState === OPEN) this.ws.send(JSON.stringify({ op: "unsub", room: room }));
    return this;
  };

  /**
   * Asks for at most max normal comments a second in every room (0: every
   * comment), from the next frame on; kept for reconnects. The server
   * serves the nearest tier not above it and says which (onDensity).
   */
  DanmakuClient.prototype.setDensity = function (max) {
    max = Math.max(0, Math.floor(Number(max) || 0));
    this.opts.density = max;
    if (this.ws && this.ws.readyState === OPEN) this.ws.send(JSON.stringify({ op: "density", max: max }));
    return this;
  };

  /** Normal comments of room (default: the current one) the density tier left out so far. */
  DanmakuClient.prototype.skipped = function (room) {
    return this.skippedBy.get(room === undefined ? this.room : room) || 0;
  };

  /** Closes the connection for good (until connect() again). */
  DanmakuClient.prototype.close = function () {
    this.wanted = false;
    clearTimeout(this.retryTimer);
    clearTimeout(this.playTimer);
    this.retryTimer = this.playTimer = null;
    this.queue = [];
    this._stopHeartbeat();
    if (this.ws) {
      this.ws.close(1000, "bye");
    } else {
      this._setState("closed", {});
    }
    return this;
  };

  function request(self, method, path, body) {
    var ctrl = typeof AbortController === "function" ? new AbortController() : null;
    var timer = ctrl ? setTimeout(function () { ctrl.abort(); }, self.opts.sendTimeoutMs) : null;
    var init = { method: method, headers: {}, signal: ctrl ? ctrl.signal : undefined };
    if (self.opts.token) init.headers["Authorization"] = "Bearer " + self.opts.token;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    var base = self.opts.baseUrl || "";
    return fetch(base + path, init).catch(function (e) {
      // The browser says only "Failed to fetch" (or aborted): say what it means.
      var timedOut = e && e.name === "AbortError";
      var err = new Error(timedOut
        ? "no answer from the server within " + self.opts.sendTimeoutMs + " ms"
        : "cannot reach the server" + (base ? " at " + base : ""));
      err.status = 0;
      err.code = "unavailable";
      err.field = "";
      throw err;
    }).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
        if (!resp.ok) {
          var d = (data && data.error) || {};
          var err = new Error(d.message || resp.statusText || "HTTP " + resp.status);
          err.status = resp.status;
          err.code = d.code || "";
          err.field = d.field || "";
          var ra = resp.headers.get("Retry-After");
          if (ra) err.retryAfterMs = Number(ra) * 1000;
          throw err;
        }
        return data;
      });
    }).finally(function () { clearTimeout(timer); });
  }

  /** A fresh idempotency key: time and randomness, [0-9a-z], 18 characters. */
  function newMsgId() {
    var r = Math.random().toString(36).slice(2, 10);
    return Date.now().toString(36) + (r + "00000000").slice(0, 8);
  }

  /**
   * Posts comments to the current room (or who.room). contents is a
   * string or an array of strings. Every comment gets an idempotency key
   * (msgId) for this call, so a retry never shows it twice: after a 503 or
   * when no answer came (status 0), the same request is sent again, up to
   * opts.sendRetries times with growing, jittered pauses. Resolves to the
   * server's answer ({msgIds}); rejects with an Error carrying status,
   * code, field and, for 429, retryAfterMs. With opts.token set, the server
   * takes the user from the token; who.userId may then be left out, and
   * the comments go over the open WebSocket when its comet takes them
   * (client.sentOver says "socket" or "http" for the last one), else over
   * HTTP; a retry keeps the msgIds whichever way it goes.
   */
  DanmakuClient.prototype.send = function (contents, who) {
    who = who || {};
    var list = Array.isArray(contents) ? contents : [contents];
    var base = who.msgId || newMsgId();
    var body = {
      roomId: who.room || this.room,
      messages: list.map(function (c, i) {
        return { content: String(c), msgId: list.length > 1 ? base + "." + i : base };
      })
    };
    if (who.userId != null && who.userId !== "") body.userId = Number(who.userId);
    if (who.userName) body.userName = who.userName;
    var self = this, tries = Math.max(0, self.opts.sendRetries | 0);
    function attempt(n) {
      var onSocket = self._sendOnSocket(body);
      self.sentOver = onSocket ? "socket" : "http";
      return (onSocket || request(self, "POST", "/logic/send", body)).catch(function (err) {
        var retriable = err.status === 0 || err.status === 503;
        if (!retriable || n >= tries) throw err;
        var ceil = 250 * Math.pow(2, n);
        return new Promise(function (resolve) {
          setTimeout(resolve, ceil / 2 + Math.random() * ceil / 2);
        }).then(function () { return attempt(n + 1); });
      });
    }
    return attempt(0);
  };

  // HTTP status of each code a refused send carries, so a send over the
  // socket fails like one over HTTP.
  var SEND_STATUS = {
    invalid_argument: 400, content_blocked: 400, permission_denied: 403, priority_denied: 403,
    muted: 403, banned: 403, members_only: 403, token_expired: 401, duplicate_content: 409,
    slow_mode: 429, rate_limited: 429, unavailable: 503
  };

  /** The field of a send frame's refusal in the terms of POST /logic/send. */
  function httpField(field) {
    if (field === "room") return "roomId";
    if (field === "uid") return "userId";
    return String(field || "").replace(/^msgs/, "messages");
  }

  /**
   * Settles the send of ref f.ref: resolves it with an ack's ids, or
   * rejects it with err (an error frame). Reports whether a send waited.
   */
  DanmakuClient.prototype._answered = function (f, err) {
    var p = this.sends.get(f.ref);
    if (!p) return false;
    this.sends.delete(f.ref);
    clearTimeout(p.timer);
    if (!err) {
      p.resolve({ msgIds: Array.isArray(f.ids) ? f.ids : [] });
      return true;
    }
    var e = new Error(err.message || err.code);
    e.status = SEND_STATUS[err.code] || 400;
    e.code = err.code || "";
    e.field = httpField(err.field);
    if (err.retryAfterMs) e.retryAfterMs = err.retryAfterMs;
    p.reject(e);
    return true;
  };

  /** Fails every send waiting on the socket as unanswered (status 0). */
  DanmakuClient.prototype._dropSends = function () {
    this.socketSend = false;
    var waiting = this.sends;
    this.sends = new Map();
    waiting.forEach(function (p) {
      clearTimeout(p.timer);
      p.reject(Object.assign(new Error("the connection closed before the send was answered"),
        { status: 0, code: "unavailable", field: "" }));
    });
  };

  /**
   * Sends body's messages on the socket ({"op":"send"}), when it can say
   * who sends as HTTP would: the page has a token (the comet takes the
   * user from the connection's, as logic from the bearer), the WebSocket
   * is open and its welcome said send:true. Returns null otherwise.
   */
  DanmakuClient.prototype._sendOnSocket = function (body) {
    var ws = this.ws;
    if (!this.opts.token || !this.socketSend || !ws || ws.readyState !== OPEN) return null;
    var self = this, ref = ++this.nextRef;
    return new Promise(function (resolve, reject) {
      var timer = setTimeout(function () {
        self.sends.delete(ref);
        reject(Object.assign(new Error("no answer from the server within " + self.opts.sendTimeoutMs + " ms"),
          { status: 0, code: "unavailable", field: "" }));
      }, self.opts.sendTimeoutMs);
      self.sends.set(ref, { resolve: resolve, reject: reject, timer: timer });
      ws.send(JSON.stringify({ op: "send", room: body.roomId, msgs: body.messages, ref: ref }));
    });
  };

  /** Resolves to the number of viewers of room (default: the current one). */
  DanmakuClient.prototype.online = function (room) {
    var self = this;
    return request(this, "GET", "/logic/online?roomId=" + encodeURIComponent(room || this.room))
      .then(function (d) {
        self.onlineCount = d && typeof d.online === "number" ? d.online : 0;
        return self.onlineCount;
      });
  };

  DanmakuClient.SeenSet = SeenSet;
  global.DanmakuClient = DanmakuClient;
})(typeof window !== "undefined" ? window : this);
