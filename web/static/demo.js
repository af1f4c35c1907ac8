/*
 * The demo page: a video-like stage where comments fly across in lanes,
 * a composer, a room switcher, the room's online count and the state of
 * the connection. Everything network-related goes through DanmakuClient.
 * Live comments fly across the stage and go to the chat log; replayed ones
 * (the room's recent history on entering it, comments missed while the
 * connection was down) go to the chat log only.
 */
(function () {
  "use strict";

  var ROOMS = ["lobby", "music", "gaming", "sports"];
  var FLIGHT_MS = 8000;      // time a comment takes to cross the stage
  var LANE_GAP_PX = 32;      // free space kept behind a comment in its lane
  var MAX_WAITING = 200;     // comments waiting for a lane; beyond: skipped
  var MAX_LOG = 150;         // chat lines kept in the side panel
  var MAX_STASHED = 16;      // rooms whose chat is kept for coming back
  var DENSITY_STEPS = [10, 30, 60, 0]; // the density slider's stops: comments a second, 0 all
  var PIN_MS = 6000;         // how long a high-priority comment stays pinned
  var MAX_PINS = 3;          // pinned comments shown at once
  var SAMPLES = [
    "666", "wwwww", "前方高能！", "this is so good", "GG", "好耶", "LOL",
    "first time here 👋", "8888888", "哈哈哈哈哈", "clip it!", "草",
    "the drop is coming", "nice play", "awesome!!", "我来了", "🔥🔥🔥",
    "who else is watching at 3am", "encore!", "respect", "神回", "let's go"
  ];

  var $ = function (id) { return document.getElementById(id); };
  var layer = $("layer"), log = $("log");
  var DEFAULT_HINT = $("hint").textContent;

  // Where the API lives: the serving binary fills in the meta tag when it
  // is not this page's origin (a comet serving the page for a logic
  // elsewhere); empty means same origin.
  var meta = document.querySelector('meta[name="danmaku-api"]');
  var apiBase = ((meta && meta.content) || "").replace(/\/+$/, "");
  $("metrics-link").href = apiBase + "/metrics";

  // Identity: a numeric user id and a name. A name the user typed is kept
  // (with its user id) for every tab of this browser; until then each tab
  // is a guest of its own, kept across reloads of that tab.
  function load(store, key) {
    try { return store.getItem(key); } catch (e) { return null; } /* private mode */
  }
  function save(store, key, v) {
    try { if (v == null) store.removeItem(key); else store.setItem(key, v); } catch (e) { /* ignore */ }
  }
  var local = window.localStorage, session = window.sessionStorage;
  // A token in the page's address (#token=JWT, from the site's backend or
  // `danmaku token`) signs the page in where the servers require tokens and
  // offer none (the role binaries with auth on): its sub and name are the
  // page's user. The fragment never reaches a server.
  var urlToken = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  var tokenUser = urlToken ? claimsOf(urlToken) : null;
  function claimsOf(tok) {
    try {
      var b64 = tok.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      var bytes = Uint8Array.from(atob(b64), function (c) { return c.charCodeAt(0); });
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) { return null; }
  }
  var chosenName = load(local, "danmaku.chosenName");
  var userId = Number((chosenName && load(local, "danmaku.chosenUid")) || load(session, "danmaku.uid") || 0);
  if (tokenUser && Number(tokenUser.sub) > 0) {
    userId = Number(tokenUser.sub);
  } else if (!(userId > 0)) {
    userId = 1 + Math.floor(Math.random() * 2147483646);
    save(session, "danmaku.uid", String(userId));
  }
  $("name").value = (tokenUser && tokenUser.name) || chosenName || "Guest" + String(userId % 10000).padStart(4, "0");
  $("name").addEventListener("change", function () {
    if (tokenUser) return; // the token names the user
    var v = this.value.trim();
    save(local, "danmaku.chosenName", v || null);
    save(local, "danmaku.chosenUid", v ? String(userId) : null);
  });

  // Length limits count characters (code points) as the server does; the
  // maxlength attribute would count UTF-16 units, so an emoji would count
  // twice.
  function chars(s) { return Array.from(s).length; }
  document.querySelectorAll("[data-max-chars]").forEach(function (el) {
    var max = Number(el.dataset.maxChars);
    el.addEventListener("input", function () {
      var cps = Array.from(el.value);
      if (cps.length > max) el.value = cps.slice(0, max).join("");
    });
  });

  var params = new URLSearchParams(location.search);
  var room = validRoom(params.get("room")) ? params.get("room") : "lobby";
  function validRoom(r) { return !!r && /^[A-Za-z0-9_.\-]{1,64}$/.test(r); }

  // The density slider's position is kept for this browser.
  var savedStep = load(local, "danmaku.densityStep");
  var densityStep = savedStep === null ? NaN : Number(savedStep);
  if (!(densityStep >= 0 && densityStep < DENSITY_STEPS.length)) densityStep = DENSITY_STEPS.length - 1;

  // ---- the client -------------------------------------------------------
  var shown = 0;
  var client = new DanmakuClient({
    room: room,
    uid: userId,
    token: urlToken,
    baseUrl: apiBase,
    density: DENSITY_STEPS[densityStep],
    onDensity: function (max, r) {
      if (r !== room) return;
      $("density-text").textContent = max ? max + "/s" : "all";
      $("density-text").dataset.served = String(max);
    },
    onSkipped: function (n, r, total) { if (r === room) setSkipped(total); },
    onMessage: function (m, meta) { show(m, meta.replay); },
    onState: function (state, info) { setConn(state, info); },
    // The welcome carries the room's count, online frames keep it current:
    // nothing is polled.
    onWelcome: function (w) {
      setOnline(w.online);
      system("joined #" + w.room);
      renderModes(client.roomState(w.room));
      renderPin(client.pinned(w.room));
    },
    onRoomState: function (st, room) {
      if (room !== client.room) return;
      renderModes(st);
      system("room modes changed: " + (modeLabels(st).join(", ") || "none"));
    },
    onPin: function (pin, room) { if (room === client.room) renderPin(pin); },
    onOnline: function (n) { setOnline(n); },
    onGap: function (g) {
      // Another epoch means the server lost the room's history (a restart
      // without it, a failover): nothing was missed that could be shown.
      var reset = g.reason === "epoch" || (g.epoch || "") !== (g.serverEpoch || "");
      system(reset ? "the room's history was reset on the server (#" + g.room + "); comments from before may be missing"
        : "some comments of #" + g.room + " sent while offline could not be recovered");
    },
    onDelete: function (ids) { ids.forEach(unshow); },
    onUser: function (msgs) { announce("user", msgs); },
    onBroadcast: function (msgs) { announce("all", msgs); },
    onError: function (e) { hint("server: " + e.message, true); }
  });

  function setConn(state, info) {
    if (state === "open") {
      probed = false;
      if (netHint) hint(DEFAULT_HINT); // the server is back: the red hint is stale
    }
    if (state === "reconnecting" && !probed) probe();
    if (signInNeeded) return;
    var el = $("conn"), text = state, open = state === "open";
    el.dataset.state = open ? "open" : state === "closed" ? "closed" : "connecting";
    if (open) text = client.transport === "sse" ? "live (SSE)" : "live";
    el.dataset.transport = client.transport;
    if (state === "reconnecting" && info.delayMs != null) {
      text = "reconnecting in " + (info.delayMs / 1000).toFixed(1) + "s";
    }
    if (state === "closed" && info.code === 4003) text = "banned from #" + info.room;
    $("conn-text").textContent = text;
    // Not connected: the stage is not live and the last count is not
    // known to hold.
    $("live").textContent = open ? "LIVE" : "OFFLINE";
    $("live").classList.toggle("off", !open);
    if (!open) $("online").textContent = "–";
  }
  function setOnline(n) { $("online").textContent = String(n); }

  // A refused WebSocket handshake (401 without a valid token) looks to the
  // page like a server that is down: the browser gives it no status. At the
  // first failed connection after an open one (or the start), the page asks
  // the same URL once over plain HTTP, where the comet answers a refusal as
  // JSON; a refused token stops the reconnecting and says why.
  var probed = false, signInNeeded = false;
  function probe() {
    probed = true;
    var url = client._wsURL().replace(/^ws(s?):/, "http$1:");
    fetch(url, { cache: "no-store" }).then(function (r) {
      if (r.status !== 401 && r.status !== 403) return;
      return r.json().then(function (b) {
        var e = (b && b.error) || {};
        if (e.code !== "unauthenticated" && e.field !== "uid") return;
        signInNeeded = true;
        client.close();
        $("conn").dataset.state = "closed";
        $("conn-text").textContent = "not signed in";
        $("live").textContent = "OFFLINE";
        $("live").classList.add("off");
        hint(urlToken
          ? "the server refused this page's token (" + (e.message || e.code) + "): open the page with a fresh #token="
          : "this server requires a sign-in token (comet.auth: jwt) and this page has none: open it with #token=<JWT>", true);
      });
    }, function () { /* unreachable: a real outage, keep reconnecting */ });
  }

  // ---- lanes -------------------------------------------------------------
  // Every comment crosses in FLIGHT_MS, so a long one moves faster than a
  // short one. A lane takes a new comment once (a) the previous one's tail
  // has entered the stage plus a gap, and (b) the new one, being perhaps
  // faster, cannot catch the previous one before it has left.
  var lanes = [];
  var waiting = [];
  var laneHeight = 38;

  function laneCount() {
    return Math.max(1, Math.floor(layer.clientHeight / laneHeight));
  }

  function laneFreeAt(lane, width, stageW, now) {
    if (!lane || lane.anim.playState === "finished") return now;
    // Measure from where the animation really is: under load it can start
    // frames after it was created, and a stored start time would be early.
    var start = now - (lane.anim.currentTime || 0);
    var v1 = (stageW + lane.width) / FLIGHT_MS;
    var v2 = (stageW + width) / FLIGHT_MS;
    var tailIn = start + (lane.width + LANE_GAP_PX) / v1;
    var noCatch = start + FLIGHT_MS - (stageW - LANE_GAP_PX) / v2;
    return Math.max(tailIn, noCatch);
  }

  function place(el, width) {
    var stageW = layer.clientWidth, now = performance.now();
    var n = laneCount(), best = -1, bestAt = Infinity;
    for (var i = 0; i < n; i++) {
      var at = laneFreeAt(lanes[i], width, stageW, now);
      if (at <= now) { best = i; bestAt = at; break; }
      if (at < bestAt) { best = i; bestAt = at; }
    }
    if (bestAt > now) return false;
    el.style.top = (best * laneHeight) + "px";
    var anim = el.animate(
      [{ transform: "translateX(" + stageW + "px)" }, { transform: "translateX(" + (-width) + "px)" }],
      { duration: FLIGHT_MS, easing: "linear" });
    anim.onfinish = function () { el.remove(); };
    lanes[best] = { anim: anim, width: width };
    return true;
  }

  // A high-priority comment (paid, moderator, system) is pinned at the top
  // of the stage for a while instead of flying.
  function pin(m) {
    var box = $("pins");
    var el = document.createElement("div");
    el.className = "pin";
    el.dataset.id = m.id;
    var who = document.createElement("span");
    who.className = "who";
    who.textContent = m.name || "anon";
    el.appendChild(who);
    el.appendChild(document.createTextNode(m.content));
    box.appendChild(el);
    while (box.children.length > MAX_PINS) box.removeChild(box.firstChild);
    setTimeout(function () { el.remove(); }, PIN_MS);
  }

  function fly(m) {
    if (m.priority === 1) { pin(m); return; }
    var el = document.createElement("div");
    el.className = "bullet" + (m.uid === userId ? " mine" : "");
    el.dataset.id = m.id;
    el.style.color = colorOf(m.uid);
    var who = document.createElement("span");
    who.className = "who";
    who.textContent = m.name || "anon";
    el.appendChild(who);
    el.appendChild(document.createTextNode(m.content));
    el.style.transform = "translateX(" + layer.clientWidth + "px)";
    layer.appendChild(el);
    var width = el.offsetWidth;
    if (!place(el, width)) {
      // The viewer's own comment goes first and is never the one skipped:
      // it is the one they look for.
      if (m.uid === userId) {
        if (waiting.length >= MAX_WAITING) waiting.pop().el.remove();
        waiting.unshift({ el: el, width: width });
      } else if (waiting.length >= MAX_WAITING) {
        el.remove();
        return;
      } else {
        waiting.push({ el: el, width: width });
      }
      tickWaiting();
    }
  }

  var waitingTimer = null;
  function tickWaiting() {
    if (waitingTimer) return;
    waitingTimer = setTimeout(function () {
      waitingTimer = null;
      while (waiting.length && place(waiting[0].el, waiting[0].width)) waiting.shift();
      if (waiting.length) tickWaiting();
    }, 50);
  }

  var PALETTE = ["#ffffff", "#ffffff", "#ffffff", "#ffe27a", "#8ee6ff", "#ff9bc0", "#b5ff9e", "#ffc38a", "#d6b8ff"];
  function colorOf(uid) {
    var h = Math.imul((uid | 0) ^ 0x5bd1e995, 2654435761) >>> 0;
    return PALETTE[h % PALETTE.length];
  }

  // ---- chat log and statistics ------------------------------------------
  var shownAt = [], delays = [];
  setInterval(function () {
    var cut = Date.now() - 5000;
    while (shownAt.length && shownAt[0] < cut) shownAt.shift();
    $("rate").textContent = (shownAt.length / 5).toFixed(1);
    if (delays.length) {
      var sorted = delays.slice().sort(function (a, b) { return a - b; });
      $("delay").textContent = sorted[sorted.length >> 1] + " ms";
    }
    $("waiting").textContent = String(waiting.length);
  }, 500);

  function show(m, replay) {
    // With the stage switched off comments still go to the chat log; a
    // replayed comment is not live and stays off the stage.
    if (!replay && $("dm-toggle").checked) fly(m);
    var li = document.createElement("li");
    li.dataset.id = m.id;
    if (m.uid === userId) li.classList.add("mine");
    if (m.priority === 1) li.classList.add("high");
    if (replay) li.classList.add("replay");
    var at = document.createElement("span");
    at.className = "at";
    at.textContent = new Date(m.ts).toLocaleTimeString([], { hour12: false });
    var who = document.createElement("span");
    who.className = "who";
    who.style.color = colorOf(m.uid) === "#ffffff" ? "#b9c2ff" : colorOf(m.uid);
    who.textContent = m.name || "anon";
    li.appendChild(at);
    li.appendChild(who);
    li.appendChild(document.createTextNode(m.content));
    appendLog(li);
    shown++;
    $("count").textContent = shown + (shown === 1 ? " message" : " messages");
    if (replay) return;
    var now = Date.now();
    shownAt.push(now);
    delays.push(Math.max(0, now - m.ts));
    if (delays.length > 100) delays.shift();
  }

  // A comment a moderator deleted leaves the chat log and the stage, and
  // does not enter it from the lanes' waiting list.
  function unshow(id) {
    document.querySelectorAll("#log li, #layer .bullet, #pins .pin").forEach(function (el) {
      if (el.dataset.id === id) el.remove();
    });
    waiting = waiting.filter(function (w) { return w.el.dataset.id !== id; });
  }

  function setSkipped(total) { $("skipped").textContent = "+" + total.toLocaleString("en-US"); }

  function system(text) {
    var li = document.createElement("li");
    li.className = "sys";
    li.textContent = text;
    appendLog(li);
  }

  function appendLog(li) {
    var stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 30;
    log.appendChild(li);
    while (log.children.length > MAX_LOG) log.removeChild(log.firstChild);
    if (stick) log.scrollTop = log.scrollHeight;
  }

  // ---- notices --------------------------------------------------------------
  // Notices to this user and broadcasts show as a banner over the stage,
  // one after another, and stay in the chat log.
  var BANNER_MS = 6000, BANNER_QUEUED_MS = 2500, MAX_BANNERS = 20;
  var banners = [], bannerTimer = null;
  function noticeText(n) {
    if (n.content) return n.content;
    try { return JSON.stringify(n.data); } catch (e) { return ""; }
  }
  function announce(kind, msgs) {
    msgs.forEach(function (n) {
      var text = noticeText(n);
      system((kind === "user" ? "for you: " : "announcement: ") + text);
      if (banners.length < MAX_BANNERS) banners.push({ kind: kind, id: n.id, text: text });
    });
    if (!bannerTimer) nextBanner();
  }
  function nextBanner() {
    var el = $("banner"), b = banners.shift();
    if (!b) { el.hidden = true; bannerTimer = null; return; }
    el.dataset.kind = b.kind;
    el.dataset.id = b.id;
    $("banner-kind").textContent = b.kind === "user" ? "For you" : "Announcement";
    $("banner-text").textContent = b.text;
    el.hidden = false;
    bannerTimer = setTimeout(nextBanner, banners.length ? BANNER_QUEUED_MS : BANNER_MS);
  }

  // netHint: the hint says the server could not be reached; it goes once
  // the connection is open again.
  var netHint = false;
  function hint(text, isError, isNet) {
    var el = $("hint");
    el.textContent = text;
    el.classList.toggle("error", !!isError);
    netHint = !!isNet;
  }

  // ---- rooms --------------------------------------------------------------
  function renderRooms() {
    var nav = $("rooms");
    nav.textContent = "";
    var list = ROOMS.indexOf(room) < 0 ? ROOMS.concat([room]) : ROOMS;
    list.forEach(function (r) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "chip" + (r === room ? " active" : "");
      b.textContent = "#" + r;
      b.onclick = function () { switchRoom(r); };
      nav.appendChild(b);
    });
    $("room-tag").textContent = "#" + room;
    $("show-title").textContent = "#" + room;
    document.title = "#" + room + " · danmaku live";
  }

  var stash = new Map(); // room -> {lines, shown}, least recently left first
  function switchRoom(r) {
    if (!validRoom(r) || r === room) return;
    // The chat log shows one room. A room's lines are kept when leaving it
    // and put back on coming back, where the client resumes the room.
    stash.delete(room);
    stash.set(room, { lines: Array.prototype.slice.call(log.children), shown: shown });
    if (stash.size > MAX_STASHED) stash.delete(stash.keys().next().value);
    room = r;
    params.set("room", r);
    history.replaceState(null, "", "?" + params.toString());
    layer.textContent = "";
    lanes = [];
    waiting = [];
    log.textContent = "";
    var back = stash.get(r);
    stash.delete(r);
    shown = back ? back.shown : 0;
    if (back) back.lines.forEach(function (li) { log.appendChild(li); });
    log.scrollTop = log.scrollHeight;
    $("count").textContent = shown + (shown === 1 ? " message" : " messages");
    setSkipped(client.skipped(r));
    renderRooms();
    client.join(r);
  }

  $("room-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var input = $("room-input");
    if (!validRoom(input.value)) { hint("room ids use letters, digits, _ . - (1-64)", true); return; }
    switchRoom(input.value);
    input.value = "";
  });

  // ---- room modes and the pin -----------------------------------------------
  function modeLabels(st) {
    var out = [];
    if (!st) return out;
    if (st.slowSeconds) out.push("Slow mode · 1 comment / " + st.slowSeconds + " s");
    if (st.membersOnly) out.push("Members only");
    if (st.uniqueSeconds) out.push("Unique chat · " + st.uniqueSeconds + " s");
    return out;
  }
  function renderModes(st) {
    var box = $("modes"), labels = modeLabels(st);
    box.textContent = "";
    labels.forEach(function (l) {
      var chip = document.createElement("span");
      chip.className = "mode";
      chip.textContent = l;
      box.appendChild(chip);
    });
    box.hidden = labels.length === 0;
  }
  function renderPin(pin) {
    var box = $("pinned");
    box.hidden = !pin;
    if (!pin) return;
    $("pin-name").textContent = pin.name ? pin.name + ": " : "";
    $("pin-text").textContent = pin.content;
    $("pin-amount").hidden = !pin.amount;
    $("pin-amount").textContent = pin.amount ? "♥ " + pin.amount : "";
    box.classList.toggle("paid", !!pin.amount);
  }

  // Slow mode: the Send button counts down until the next comment may go.
  var coolUntil = 0, coolTimer = null;
  function cooldown(ms) {
    coolUntil = Math.max(coolUntil, Date.now() + ms);
    clearInterval(coolTimer);
    var btn = $("send");
    var tick = function () {
      var left = Math.ceil((coolUntil - Date.now()) / 1000);
      if (left <= 0) {
        clearInterval(coolTimer);
        btn.disabled = false;
        btn.textContent = "Send";
        return;
      }
      btn.disabled = true;
      btn.textContent = "Wait " + left + "s";
    };
    tick();
    coolTimer = setInterval(tick, 250);
  }

  // refusal explains a refused send in words a viewer understands.
  function refusal(e) {
    var st = client.roomState() || {};
    switch (e.code) {
      case "slow_mode":
        cooldown(e.retryAfterMs || (st.slowSeconds || 1) * 1000);
        return "Slow mode is on: one comment every " + (st.slowSeconds || "few") + " s in this room. Wait " +
          Math.ceil((e.retryAfterMs || 1000) / 1000) + " s.";
      case "members_only":
        return "This room is members-only: only members can comment here.";
      case "duplicate_content":
        return "Unique chat is on: that was said in the last " + (st.uniqueSeconds || "few") + " s. Say something new.";
    }
    if (e.status === 429) return "slow down: try again in " + Math.ceil((e.retryAfterMs || 1000) / 1000) + "s";
    return e.field ? e.field + ": " + e.message : e.message;
  }

  // ---- sending ------------------------------------------------------------
  function post(contents) {
    var btn = $("send");
    btn.disabled = true;
    return client.send(contents, { userId: userId, userName: $("name").value.trim() || "anon" })
      .then(function () {
        hint(DEFAULT_HINT);
        var st = client.roomState();
        if (st && st.slowSeconds) cooldown(st.slowSeconds * 1000);
      })
      .catch(function (e) {
        var net = e.code === "unavailable" && !e.status;
        var msg = net ? "cannot reach the server; check your connection and try again" : refusal(e);
        hint(msg, true, net);
        throw e;
      })
      .finally(function () { if (Date.now() >= coolUntil) btn.disabled = false; });
  }

  $("composer").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var input = $("text"), text = input.value.trim();
    if (!text) return;
    post(text).then(function () { input.value = ""; }, function () { /* shown in hint */ });
    input.focus();
  });

  $("burst").addEventListener("click", function () {
    var out = [];
    for (var i = 0; i < 20; i++) out.push(SAMPLES[Math.floor(Math.random() * SAMPLES.length)]);
    post(out).catch(function () { /* shown in hint */ });
  });

  // The density slider: at most 10, 30 or 60 comments a second, or all; the
  // server answers with the tier it serves (onDensity).
  function densityLabel(step) { return DENSITY_STEPS[step] ? DENSITY_STEPS[step] + "/s" : "all"; }
  $("density").value = String(densityStep);
  $("density-text").textContent = densityLabel(densityStep);
  $("density").addEventListener("input", function () {
    densityStep = Number(this.value);
    $("density-text").textContent = densityLabel(densityStep);
    save(local, "danmaku.densityStep", String(densityStep));
    client.setDensity(DENSITY_STEPS[densityStep]);
  });

  $("dm-toggle").addEventListener("change", function () {
    layer.classList.toggle("hidden", !this.checked);
  });
  // Names on the flying comments can be turned off (the chat log keeps
  // them); the choice is kept for this browser.
  var namesOff = load(local, "danmaku.namesOff") === "1";
  $("names-toggle").checked = !namesOff;
  layer.classList.toggle("no-names", namesOff);
  $("names-toggle").addEventListener("change", function () {
    layer.classList.toggle("no-names", !this.checked);
    save(local, "danmaku.namesOff", this.checked ? null : "1");
  });

  // ---- clock --------------------------------------------------------------

  var started = Date.now();
  setInterval(function () {
    var s = Math.floor((Date.now() - started) / 1000);
    var hh = String(Math.floor(s / 3600)).padStart(2, "0");
    var mm = String(Math.floor(s / 60) % 60).padStart(2, "0");
    var ss = String(s % 60).padStart(2, "0");
    $("clock").textContent = hh + ":" + mm + ":" + ss;
  }, 1000);

  renderRooms();
  // A binary running with auth on for development offers a token endpoint
  // (the danmaku-dev-token meta tag): the page gets a token for its user and
  // name before it connects, and a new one when the name changes.
  var devToken = document.querySelector('meta[name="danmaku-dev-token"]');
  function fetchToken() {
    var name = $("name").value.trim() || "anon";
    return fetch(apiBase + devToken.content + "?uid=" + userId + "&name=" + encodeURIComponent(name))
      .then(function (r) { return r.json(); })
      .then(function (b) { client.opts.token = b.token; });
  }
  if (urlToken) {
    client.connect();
  } else if (devToken && devToken.content) {
    $("name").addEventListener("change", fetchToken);
    fetchToken().then(function () { client.connect(); }, function (e) { hint("no token: " + e.message, true); });
  } else {
    client.connect();
  }
  window.danmakuDemo = { client: client, switchRoom: switchRoom, post: post, userId: userId, chars: chars };
})();
