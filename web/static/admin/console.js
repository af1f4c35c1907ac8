/*
 * The moderator console: rooms with their viewers and messages a second,
 * a live view of one room through danmaku.js with one-click delete, mute,
 * ban, hide and pin, the room's settings, its review queue, the comments
 * its chat delay holds (deleted there before anyone sees them), its active
 * sanctions, the audit log and the blocked words (edited lists and the
 * configured list's reload). Everything goes
 * through logic's admin API on this page's origin, with the moderator
 * token or the admin secret as the Bearer credential; the credential is
 * kept in sessionStorage (this tab) and never put in the page's address.
 *
 * User names and comments are hostile input: everything shown is set as
 * text (textContent, text nodes), never parsed as markup.
 */
(function () {
  "use strict";

  var AUTH_KEY = "danmaku.console.auth";  // sessionStorage: {kind, value}
  var COMET_KEY = "danmaku.console.comet"; // localStorage: the comet's /ws URL
  var ROOM_KEY = "danmaku.console.room";   // sessionStorage: the open room
  var ROOMS_EVERY_MS = 3000;   // rooms list refresh
  var PANEL_EVERY_MS = 3000;   // refresh of the open tab (review, sanctions)
  var MAX_FEED = 300;          // comments kept in the live view
  var RATE_WINDOW_MS = 5000;

  var $ = function (id) { return document.getElementById(id); };

  /** el(tag, {class, title, data-x, on...}, children...): children strings are text. */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    var a = attrs || {};
    Object.keys(a).forEach(function (k) {
      var v = a[k];
      if (v == null || v === false) return;
      if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
      else if (k === "class") e.className = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    });
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c == null || c === false) continue;
      e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function load(store, key) { try { return store.getItem(key); } catch (e) { return null; } }
  function save(store, key, v) {
    try { if (v == null) store.removeItem(key); else store.setItem(key, v); } catch (e) { /* private mode */ }
  }

  function toast(text, kind) {
    var t = el("div", { class: "toast " + (kind || "") }, text);
    $("toasts").appendChild(t);
    setTimeout(function () { t.remove(); }, kind === "bad" ? 6000 : 3000);
  }
  function clock(ms) {
    var d = new Date(ms);
    return [d.getHours(), d.getMinutes(), d.getSeconds()].map(function (n) { return n < 10 ? "0" + n : n; }).join(":");
  }
  function until(ms) {
    var s = Math.max(0, Math.round((ms - Date.now()) / 1000));
    if (s < 90) return s + " s left";
    if (s < 5400) return Math.round(s / 60) + " min left";
    return Math.round(s / 3600) + " h left";
  }

  // ---- credential and API ----

  var auth = null; // {kind: "token" | "secret", value, claims}

  /** The claims of a JWT, or null when v is not one. Not verified: the server does that. */
  function claimsOf(v) {
    var parts = v.split(".");
    if (parts.length !== 3) return null;
    try {
      var b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
      var bytes = Uint8Array.from(atob(b64), function (c) { return c.charCodeAt(0); });
      var c = JSON.parse(new TextDecoder().decode(bytes));
      return c && typeof c === "object" ? c : null;
    } catch (e) { return null; }
  }

  function apiError(status, body, fallback) {
    var d = (body && body.error) || {};
    var err = new Error(d.message || fallback || "HTTP " + status);
    err.status = status;
    err.code = d.code || "";
    err.field = d.field || "";
    return err;
  }

  /** Calls the admin API; resolves to the JSON answer, rejects with {status, code, field, message}. */
  function api(method, path, body) {
    var ctrl = new AbortController();
    var timer = setTimeout(function () { ctrl.abort(); }, 10000);
    var init = { method: method, headers: { "Authorization": "Bearer " + (auth ? auth.value : "") }, signal: ctrl.signal };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
        if (!resp.ok) throw apiError(resp.status, data, resp.statusText);
        return data;
      });
    }, function () {
      throw apiError(0, null, "cannot reach the server");
    }).finally(function () { clearTimeout(timer); });
  }

  function describe(err) {
    if (err.status === 401) return "not signed in: the token or secret was refused";
    return err.message + (err.code ? " (" + err.code + (err.field ? ", " + err.field : "") + ")" : "");
  }

  // ---- sign in ----

  function showSignin(message) {
    $("app").hidden = true;
    $("signin").hidden = false;
    $("signin-error").textContent = message || "";
    $("comet-url").value = load(localStorage, COMET_KEY) || "";
    $("credential").focus();
  }

  function signIn(value) {
    value = value.trim();
    var claims = claimsOf(value);
    auth = { kind: claims ? "token" : "secret", value: value, claims: claims };
    return api("GET", "/logic/admin/rooms").then(function (res) {
      save(sessionStorage, AUTH_KEY, JSON.stringify({ value: value }));
      startApp(res);
    }, function (err) {
      auth = null;
      save(sessionStorage, AUTH_KEY, null);
      throw err;
    });
  }

  $("signin-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    save(localStorage, COMET_KEY, $("comet-url").value.trim() || null);
    var v = $("credential").value;
    $("credential").value = "";
    signIn(v).catch(function (err) { showSignin(describe(err)); });
  });

  $("signout").addEventListener("click", function () {
    save(sessionStorage, AUTH_KEY, null);
    save(sessionStorage, ROOM_KEY, null);
    location.reload();
  });

  function whoText() {
    if (auth.kind === "secret") return "admin (secret): every room";
    var c = auth.claims, rooms = Array.isArray(c.rooms) ? c.rooms.join(", ") : "every room";
    return "moderator " + (c.name || "user " + c.sub) + ": " + rooms;
  }

  // ---- rooms ----

  var heads = new Map(); // room -> {epoch, pos, at, rate}
  var roomsTimer = null, panelTimer = null;

  function rate(l, now) {
    var prev = heads.get(l.roomId), r = prev ? prev.rate : null;
    if (prev && prev.epoch === (l.epoch || "") && now > prev.at) r = Math.max(0, (l.pos - prev.pos) * 1000 / (now - prev.at));
    heads.set(l.roomId, { epoch: l.epoch || "", pos: l.pos, at: now, rate: r });
    return r;
  }

  function refreshRooms() {
    return api("GET", "/logic/admin/rooms").then(function (res) {
      var list = res.rooms || [];
      if (current && !list.some(function (l) { return l.roomId === current; })) {
        return api("GET", "/logic/admin/rooms?roomId=" + encodeURIComponent(current)).then(function (more) {
          return list.concat(more.rooms || []);
        }, function () { return list; });
      }
      return list;
    }).then(renderRooms, function (err) {
      if (err.status === 401) showSignin(describe(err));
      $("rooms-updated").textContent = "not updated: " + describe(err);
    });
  }

  function renderRooms(list) {
    var ul = $("room-list"), now = Date.now();
    clear(ul);
    list.forEach(function (l) {
      var r = rate(l, now);
      var b = el("button", { type: "button", class: "room" + (l.roomId === current ? " active" : ""), "data-room": l.roomId,
        onclick: function () { openRoom(l.roomId); } },
        el("span", { class: "room-id" }, "#" + l.roomId),
        el("span", { class: "num" }, String(l.online)),
        el("span", { class: "num" }, r == null ? "…" : r.toFixed(r < 10 ? 1 : 0)));
      ul.appendChild(el("li", null, b));
    });
    $("rooms-empty").hidden = list.length > 0;
    $("rooms-updated").textContent = "updated " + clock(now);
  }

  $("open-room").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var id = $("open-room-id").value.trim();
    if (!id) return;
    $("open-room-id").value = "";
    openRoom(id);
  });

  // ---- the live view ----

  var current = "";
  var client = null;
  var state = { ver: 0 };   // the room's settings as the live view last got them
  var shownAt = [];         // times comments arrived, for msg/s
  var pinned = null;

  function openRoom(room) {
    if (!/^[A-Za-z0-9_.\-]{1,64}$/.test(room)) {
      toast("room ids are 1 to 64 of A-Z a-z 0-9 _ . -", "bad");
      return;
    }
    current = room;
    save(sessionStorage, ROOM_KEY, room);
    state = { ver: 0 };
    shownAt = [];
    $("pause").checked = false;
    clear($("feed"));
    $("feed-empty").hidden = false;
    $("feed-empty").textContent = "Waiting for comments in #" + room + "…";
    $("room-name").textContent = "#" + room;
    showState(state);
    showPin(null);
    document.querySelectorAll(".room").forEach(function (b) { b.classList.toggle("active", b.dataset.room === room); });
    if (client) client.close();
    client = new DanmakuClient({
      room: room,
      url: load(localStorage, COMET_KEY) || "",
      token: auth.kind === "token" ? auth.value : "",
      paceMs: 0,
      onMessage: function (m, meta) { addComment(m, meta.replay); },
      onDelete: function (ids) { markDeleted(ids); },
      onOnline: function (n) { $("room-online").textContent = String(n); },
      onWelcome: function (w) { $("room-online").textContent = String(w.online); },
      onRoomState: function (st) { showState(st); },
      onPin: function (p) { showPin(p); },
      onState: function (s, info) { showConn(s, info); },
      onError: function (e) { toast("live view: " + (e.message || e.code || "error"), "bad"); }
    });
    client.connect();
    refreshPanel();
    refreshRooms();
  }

  function showConn(s, info) {
    var text = s;
    if (s === "closed" && info && info.code === 4003) text = "refused";
    if (s === "reconnecting" && info && info.delayMs) text = "reconnecting";
    $("conn").dataset.state = s;
    $("conn-text").textContent = text;
  }

  function addComment(m, replay) {
    var feed = $("feed");
    if (!replay) shownAt.push(Date.now());
    $("feed-empty").hidden = true;
    var li = el("li", { class: "comment" + (m.priority === 1 ? " high" : "") + (replay ? " replay" : ""), "data-id": m.id, "data-uid": m.uid },
      el("span", { class: "time" }, clock(m.ts || Date.now())),
      el("span", { class: "who" },
        el("span", { class: "name" }, m.name || "anon"),
        el("span", { class: "uid" }, m.uid ? "#" + m.uid : "")),
      el("span", { class: "text" }, m.content || ""),
      el("span", { class: "acts" },
        act("Delete", "delete this comment for every viewer", function () { deleteComment(m, li); }, "bad"),
        act("Mute", "the user's comments are refused here", function () { sanction("mute", m); }),
        act("Ban", "the user leaves the room and may not join", function () { sanction("ban", m); }, "bad"),
        act("Hide", "only the user sees its comments (shadow hide)", function () { sanction("hide", m); }),
        act("Pin", "pin this comment for the room", function () { pinComment(m); })));
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > MAX_FEED) feed.removeChild(feed.lastChild);
  }

  function act(label, title, fn, kind) {
    return el("button", { type: "button", class: "act " + (kind || ""), title: title, "data-act": label.toLowerCase(), onclick: fn }, label);
  }

  function markDeleted(ids) {
    ids.forEach(function (id) {
      var li = $("feed").querySelector('li[data-id="' + CSS.escape(id) + '"]');
      if (!li || li.classList.contains("deleted")) return;
      li.classList.add("deleted");
      li.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    });
  }

  function deleteComment(m, li) {
    li.classList.add("pending");
    api("POST", "/logic/admin/delete", { roomId: current, ids: [m.id] }).then(function () {
      markDeleted([m.id]);
      toast("deleted the comment of " + (m.name || "anon"));
    }, function (err) { toast("delete: " + describe(err), "bad"); }).finally(function () { li.classList.remove("pending"); });
  }

  var PAST = { mute: "muted", ban: "banned", hide: "hid" };

  function sanction(action, m) {
    if (!m.uid) {
      toast("this comment has no user id to " + action, "bad");
      return;
    }
    var d = $("duration").value;
    api("POST", "/logic/admin/" + action, { userId: m.uid, roomId: current, duration: d }).then(function () {
      toast(PAST[action] + " " + (m.name || "anon") + " #" + m.uid + " for " + $("duration").selectedOptions[0].textContent);
      refreshPanel();
    }, function (err) { toast(action + ": " + describe(err), "bad"); });
  }

  function pinComment(m) {
    api("POST", "/logic/admin/pin", { roomId: current, ids: [m.id], duration: $("pin-duration").value }).then(function (res) {
      if (res && res.pin) showPin(res.pin);
      toast("pinned the comment of " + (m.name || "anon"));
    }, function (err) { toast("pin: " + describe(err), "bad"); });
  }

  function showPin(p) {
    pinned = p;
    $("pin").hidden = !p;
    if (!p) return;
    $("pin-name").textContent = p.name || "moderators";
    $("pin-text").textContent = p.content || "";
    $("pin-until").textContent = p.until ? until(p.until) : "";
  }

  $("unpin").addEventListener("click", function () {
    if (!pinned) return;
    api("POST", "/logic/admin/unpin", { roomId: current, ids: [pinned.id] }).then(function () {
      showPin(null);
      toast("unpinned");
    }, function (err) { toast("unpin: " + describe(err), "bad"); });
  });

  $("pin-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = $("pin-content").value.trim();
    if (!current || !text) return;
    api("POST", "/logic/admin/pin", { roomId: current, content: text, duration: $("pin-duration").value }).then(function (res) {
      $("pin-content").value = "";
      if (res && res.pin) showPin(res.pin);
      toast("pinned");
    }, function (err) { toast("pin: " + describe(err), "bad"); });
  });

  $("pause").addEventListener("change", function () {
    if (!client) return;
    // Paused: the socket stays, comments are not added (a moderator reading a line).
    client.opts.onMessage = this.checked ? null : function (m, meta) { addComment(m, meta.replay); };
  });

  setInterval(function () {
    var now = Date.now();
    while (shownAt.length && shownAt[0] < now - RATE_WINDOW_MS) shownAt.shift();
    $("room-rate").textContent = (shownAt.length * 1000 / RATE_WINDOW_MS).toFixed(1);
    if (pinned && pinned.until) {
      if (pinned.until <= now) showPin(null);
      else $("pin-until").textContent = until(pinned.until);
    }
  }, 1000);

  // ---- settings ----

  var FIELDS = [
    { id: "set-slow", key: "slowSeconds", kind: "number", badge: function (v) { return "slow " + v + " s"; } },
    { id: "set-unique", key: "uniqueSeconds", kind: "number", badge: function (v) { return "unique " + v + " s"; } },
    { id: "set-delay", key: "delaySeconds", kind: "number", badge: function (v) { return "delay " + v + " s"; } },
    { id: "set-members", key: "membersOnly", kind: "bool", badge: function () { return "members only"; } },
    { id: "set-review", key: "review", kind: "bool", badge: function () { return "review"; } }
  ];

  function value(f, st) { return f.kind === "bool" ? !!st[f.key] : Number(st[f.key] || 0); }

  function showState(st) {
    state = st || { ver: 0 };
    var modes = $("modes");
    clear(modes);
    FIELDS.forEach(function (f) {
      var v = value(f, state);
      var input = $(f.id);
      if (f.kind === "bool") input.checked = v; else input.value = String(v);
      if (v) modes.appendChild(el("span", { class: "mode", "data-mode": f.key }, f.badge(v)));
    });
    if (!modes.children.length) modes.appendChild(el("span", { class: "mode off" }, "no modes"));
    $("settings-ver").textContent = state.ver ? "version " + state.ver : "";
  }

  $("settings-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (!current) return;
    // Only what changed is sent: a server without a mode never sees its field.
    var body = { roomId: current }, changed = 0;
    FIELDS.forEach(function (f) {
      var input = $(f.id);
      var v = f.kind === "bool" ? input.checked : Math.max(0, Math.floor(Number(input.value) || 0));
      if (v !== value(f, state)) { body[f.key] = v; changed++; }
    });
    if (!changed) {
      toast("nothing changed");
      return;
    }
    api("POST", "/logic/admin/room", body).then(function (res) {
      if (res && res.state && res.state.ver > (state.ver || 0)) showState(res.state);
      toast("settings saved");
    }, function (err) { toast("settings: " + describe(err), "bad"); });
  });

  // ---- panel tabs ----

  var tab = "settings";
  document.querySelectorAll("[role=tab]").forEach(function (b) {
    b.addEventListener("click", function () {
      tab = b.dataset.tab;
      document.querySelectorAll("[role=tab]").forEach(function (x) { x.setAttribute("aria-selected", String(x === b)); });
      document.querySelectorAll(".tab").forEach(function (s) { s.hidden = s.id !== "tab-" + tab; });
      refreshPanel();
    });
  });

  function refreshPanel() {
    if (!auth || !current) return;
    refreshReview();
    refreshHeld();
    if (tab === "sanctions") refreshSanctions();
    if (tab === "audit") refreshAudit();
    if (tab === "words") refreshWords();
  }

  function unavailable(err, what) {
    return err.status === 404 && err.code !== "" ? what + " is not available on this server." : describe(err);
  }

  // ---- review queue ----

  var reviewIds = [];

  function refreshReview() {
    var room = current;
    return api("GET", "/logic/admin/review?roomId=" + encodeURIComponent(room)).then(function (res) {
      if (room !== current) return;
      renderReview((res && res.items) || []);
    }, function (err) {
      if (room !== current) return;
      renderReview([]);
      $("review-empty").textContent = unavailable(err, "The review queue");
    });
  }

  function renderReview(items) {
    var ul = $("review-list");
    var checked = new Set([].map.call(ul.querySelectorAll("input:checked"), function (c) { return c.value; }));
    clear(ul);
    reviewIds = items.map(function (it) { return it.id; });
    items.forEach(function (it) {
      ul.appendChild(el("li", { class: "item", "data-id": it.id },
        el("input", { type: "checkbox", value: it.id, "aria-label": "select", checked: checked.has(it.id) }),
        el("div", { class: "item-body" },
          el("div", { class: "item-head" },
            el("span", { class: "name" }, it.name || "anon"),
            el("span", { class: "uid" }, it.uid ? "#" + it.uid : ""),
            it.word ? el("span", { class: "word" }, it.word) : null,
            el("span", { class: "time" }, it.ts ? clock(it.ts) : "")),
          el("div", { class: "text" }, it.content || "")),
        el("div", { class: "item-acts" },
          el("button", { type: "button", class: "ok small", "data-act": "approve", onclick: function () { decide("approve", [it.id]); } }, "Approve"),
          el("button", { type: "button", class: "bad small", "data-act": "reject", onclick: function () { decide("reject", [it.id]); } }, "Reject"))));
    });
    $("review-empty").hidden = items.length > 0;
    $("review-empty").textContent = "Nothing waits for review.";
    var badge = $("review-count");
    badge.hidden = !items.length;
    badge.textContent = String(items.length);
  }

  function decide(verb, ids) {
    if (!ids.length) return;
    api("POST", "/logic/admin/review/" + verb, { roomId: current, ids: ids }).then(function (res) {
      var n = res ? (verb === "approve" ? res.approved : res.rejected) : ids.length;
      toast((verb === "approve" ? "approved " : "rejected ") + n);
      refreshReview();
    }, function (err) { toast(verb + ": " + describe(err), "bad"); });
  }

  function selected() {
    return [].map.call($("review-list").querySelectorAll("input:checked"), function (c) { return c.value; });
  }
  $("review-approve").addEventListener("click", function () { decide("approve", selected()); });
  $("review-reject").addEventListener("click", function () { decide("reject", selected()); });
  $("review-all").addEventListener("change", function () {
    var on = this.checked;
    $("review-list").querySelectorAll("input[type=checkbox]").forEach(function (c) { c.checked = on; });
  });

  // ---- held by the chat delay ----

  var HELD_EVERY_MS = 1000; // a comment is held for at most 60 s: watch it closely

  function refreshHeld() {
    var room = current;
    if (!auth || !room) return;
    api("GET", "/logic/admin/held?roomId=" + encodeURIComponent(room)).then(function (res) {
      if (room !== current) return;
      renderHeld((res && res.items) || []);
    }, function (err) {
      if (room !== current) return;
      renderHeld([]);
      $("held-empty").textContent = unavailable(err, "The list of held comments");
    });
  }

  function renderHeld(items) {
    var ul = $("held-list");
    clear(ul);
    items.forEach(function (it) {
      ul.appendChild(el("li", { class: "item", "data-id": it.id },
        el("div", { class: "item-body" },
          el("div", { class: "item-head" },
            el("span", { class: "name" }, it.name || "anon"),
            el("span", { class: "uid" }, it.uid ? "#" + it.uid : ""),
            el("span", { class: "time", "data-release": it.releaseAt }, releaseText(it.releaseAt))),
          el("div", { class: "text" }, it.content || "")),
        el("div", { class: "item-acts" },
          el("button", { type: "button", class: "bad small", "data-act": "delete", onclick: function () {
            api("POST", "/logic/admin/delete", { roomId: current, ids: [it.id] }).then(function () {
              toast("deleted before anyone saw it");
              refreshHeld();
            }, function (err) { toast("delete: " + describe(err), "bad"); });
          } }, "Delete"))));
    });
    $("held-empty").hidden = items.length > 0;
    $("held-empty").textContent = "Nothing is held.";
    var badge = $("held-count");
    badge.hidden = !items.length;
    badge.textContent = String(items.length);
  }

  function releaseText(ms) {
    var s = Math.max(0, Math.ceil((ms - Date.now()) / 1000));
    return s ? "shown in " + s + " s" : "showing";
  }
  $("held-refresh").addEventListener("click", refreshHeld);
  setInterval(function () {
    if (tab === "held") refreshHeld();
  }, HELD_EVERY_MS);

  // ---- sanctions ----

  var LIFT = { mutes: "unmute", bans: "unban", hidden: "unhide" };

  function refreshSanctions() {
    var room = current;
    api("GET", "/logic/admin/lists?roomId=" + encodeURIComponent(room)).then(function (res) {
      if (room !== current) return;
      $("sanctions-note").hidden = true;
      ["mutes", "bans", "hidden"].forEach(function (k) { renderSanctions(k, (res && res[k]) || []); });
      if (res && res.settings && res.settings.ver > (state.ver || 0)) showState(res.settings);
    }, function (err) {
      if (room !== current) return;
      ["mutes", "bans", "hidden"].forEach(function (k) { renderSanctions(k, []); });
      $("sanctions-note").hidden = false;
      $("sanctions-note").textContent = unavailable(err, "The list of sanctions");
    });
  }

  function renderSanctions(kind, list) {
    var ul = $("list-" + kind);
    clear(ul);
    list.forEach(function (s) {
      var uid = Number(s.user != null ? s.user : s.userId);
      ul.appendChild(el("li", { class: "item", "data-user": uid },
        el("div", { class: "item-body" },
          el("span", { class: "uid" }, "user #" + uid),
          el("span", { class: "dim small" }, s.until ? " " + until(s.until) : "")),
        el("button", { type: "button", class: "ghost small", "data-act": LIFT[kind], onclick: function () {
          api("POST", "/logic/admin/" + LIFT[kind], { userId: uid, roomId: current }).then(function () {
            toast(LIFT[kind] + " user #" + uid);
            refreshSanctions();
          }, function (err) { toast(LIFT[kind] + ": " + describe(err), "bad"); });
        } }, "Lift")));
    });
    if (!list.length) ul.appendChild(el("li", { class: "none dim small" }, "none"));
  }
  $("sanctions-refresh").addEventListener("click", refreshSanctions);

  // ---- audit log ----

  function refreshAudit() {
    var room = current;
    api("GET", "/logic/admin/audit?limit=50&roomId=" + encodeURIComponent(room)).then(function (res) {
      if (room !== current) return;
      var ol = $("audit-list"), entries = (res && res.entries) || [];
      clear(ol);
      entries.forEach(function (e) {
        var what = [];
        if (e.userId) what.push("user #" + e.userId);
        if (e.duration) what.push("for " + e.duration);
        if (e.ids && e.ids.length) what.push(e.ids.length + (e.ids.length === 1 ? " message" : " messages"));
        if (e.words && e.words.length) what.push(e.words.join(", ") + (e.mode ? " (" + (MODE_TEXT[e.mode] || e.mode) + ")" : ""));
        if (e.state) what.push(FIELDS.filter(function (f) { return value(f, e.state); })
          .map(function (f) { return f.badge(value(f, e.state)); }).join(", ") || "modes off");
        ol.appendChild(el("li", { class: "entry" },
          el("span", { class: "time" }, clock(e.ts)),
          el("span", { class: "actor" }, e.actor || ""),
          el("span", { class: "action" }, e.action || ""),
          el("span", { class: "what dim" }, what.join(" · "))));
      });
      $("audit-empty").hidden = entries.length > 0;
    }, function (err) {
      if (room !== current) return;
      $("audit-empty").hidden = false;
      $("audit-empty").textContent = describe(err);
    });
  }
  $("audit-refresh").addEventListener("click", refreshAudit);

  // ---- blocked words ----

  var MODE_TEXT = { reject: "refused", review: "held for review" };

  /** The words API's query and body of the chosen list: this room's or the global one. */
  function wordsScope() {
    return $("words-scope").value === "global" ? {} : { roomId: current };
  }

  function refreshWords() {
    var scope = wordsScope(), room = current;
    var q = scope.roomId ? "?roomId=" + encodeURIComponent(scope.roomId) : "";
    api("GET", "/logic/admin/words" + q).then(function (res) {
      if (room !== current || wordsScope().roomId !== scope.roomId) return;
      renderWords((res && res.words) || []);
    }, function (err) {
      renderWords([]);
      $("words-empty").textContent = err.status === 403 && auth.kind === "token"
        ? "Only the admin secret edits the list of every room." : unavailable(err, "Editing blocked words");
    });
  }

  function renderWords(words) {
    var ul = $("words-list");
    clear(ul);
    words.forEach(function (w) {
      ul.appendChild(el("li", { class: "item", "data-word": w.word },
        el("div", { class: "item-body" },
          el("span", { class: "text" }, w.word),
          el("span", { class: "dim small" }, " " + (MODE_TEXT[w.mode] || w.mode))),
        el("button", { type: "button", class: "ghost small", "data-act": "remove", onclick: function () {
          editWords("remove", [w.word]);
        } }, "Remove")));
    });
    $("words-empty").hidden = words.length > 0;
    $("words-empty").textContent = "No word edited here.";
  }

  function editWords(verb, words, mode) {
    var body = wordsScope();
    body.words = words;
    if (mode) body.mode = mode;
    return api("POST", "/logic/admin/words/" + verb, body).then(function () {
      toast((verb === "add" ? "blocked: " : "unblocked: ") + words.join(", "));
      refreshWords();
    }, function (err) {
      toast("words: " + (err.status === 403 && auth.kind === "token"
        ? "only the admin secret edits the list of every room" : describe(err)), "bad");
      throw err;
    });
  }

  $("words-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var w = $("words-input").value.trim();
    if (!w) return;
    editWords("add", [w], $("words-mode").value).then(function () { $("words-input").value = ""; }, function () {});
  });
  $("words-scope").addEventListener("change", refreshWords);
  $("words-refresh").addEventListener("click", refreshWords);

  $("words-reload").addEventListener("click", function () {
    api("POST", "/logic/admin/words/reload", {}).then(function (res) {
      $("words-result").textContent = "reloaded: " + res.words + " words, mode " + res.mode;
    }, function (err) {
      $("words-result").textContent = err.status === 403 && auth.kind === "token"
        ? "Only the admin secret reloads the blocked words." : describe(err);
    });
  });

  // ---- start ----

  function startApp(first) {
    $("signin").hidden = true;
    $("app").hidden = false;
    $("who").textContent = whoText();
    renderRooms(first.rooms || []);
    clearInterval(roomsTimer);
    clearInterval(panelTimer);
    roomsTimer = setInterval(refreshRooms, ROOMS_EVERY_MS);
    panelTimer = setInterval(refreshPanel, PANEL_EVERY_MS);
    var room = load(sessionStorage, ROOM_KEY) || new URLSearchParams(location.search).get("room");
    if (!room && first.rooms && first.rooms.length) room = first.rooms[0].roomId;
    if (room) openRoom(room);
  }

  var kept = null;
  try { kept = JSON.parse(load(sessionStorage, AUTH_KEY) || "null"); } catch (e) { kept = null; }
  if (kept && kept.value) signIn(kept.value).catch(function (err) { showSignin(describe(err)); });
  else showSignin();

  window.danmakuConsole = {
    get client() { return client; },
    get room() { return current; },
    openRoom: openRoom,
    refreshRooms: refreshRooms,
    refreshPanel: refreshPanel
  };
})();
