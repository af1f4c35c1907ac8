/*
 * The replay page: a past stream's comments fly across the stage at the
 * moment they were sent, as a (fake) video plays. Comments come from
 * GET /logic/vod/segment, 6 minutes at a time: the segment under the
 * playhead is loaded on seek and the next one is fetched ahead while the
 * current one plays; the density curve (GET /logic/vod/density) is drawn
 * over the progress bar. Deleted comments are never served, so they never
 * show.
 *
 * URL parameters: ?room=R&stream=S opens a stream at once; clock=manual
 * stops the page's own clock, so a test drives time with
 * DanmakuVOD.player.advance(ms) instead of waiting.
 */
(function () {
  "use strict";

  var SEGMENT_MS = 6 * 60 * 1000;
  var FLIGHT_MS = 8000;    // time a comment takes to cross the stage
  var PREFETCH_MS = 30000; // fetch the next segment this long before it plays
  var LANE_PX = 30;

  var api = (document.querySelector('meta[name="danmaku-api"]') || {}).content || "";
  function $(id) { return document.getElementById(id); }

  function getJSON(path) {
    return fetch(api + path, { headers: { Accept: "application/json" } }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { throw new Error((body && body.message) || ("HTTP " + r.status)); }
        return body;
      });
    });
  }

  function clock(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var m = Math.floor(s / 60);
    s %= 60;
    return (m < 10 ? "0" : "") + m + ":" + (s < 10 ? "0" : "") + s;
  }

  // Player replays one stream. pos is the playhead in milliseconds of
  // offset; every comment with an offset in (last emitted, pos] flies once.
  function Player(room, stream) {
    this.room = room;
    this.stream = stream;
    this.duration = Math.max(stream.end ? stream.end - stream.start : Date.now() - stream.start, 1);
    this.pos = 0;
    this.emitted = 0;      // comments with offset < emitted have flown (or were skipped by a seek)
    this.playing = false;
    this.segments = {};    // seg -> comments, or a promise while loading
    this.shown = [];       // ids that flew, for tests and the chat log
    this.lanes = [];
  }

  Player.prototype.url = function (what, extra) {
    return "/logic/vod/" + what + "?roomId=" + encodeURIComponent(this.room) +
      "&streamId=" + encodeURIComponent(this.stream.id) + (extra || "");
  };

  // load fetches segment n unless it is there or on its way.
  Player.prototype.load = function (n) {
    var self = this;
    if (n < 0 || n * SEGMENT_MS >= this.duration + SEGMENT_MS || this.segments[n]) {
      return Promise.resolve();
    }
    var p = getJSON(this.url("segment", "&seg=" + n)).then(function (seg) {
      self.segments[n] = seg.comments;
    }, function (err) {
      delete self.segments[n]; // tried again at the next tick
      $("vod-note").textContent = "segment " + n + ": " + err.message;
    });
    this.segments[n] = p;
    return p;
  };

  // seek moves the playhead without replaying what lies before it.
  Player.prototype.seek = function (ms) {
    this.pos = Math.max(0, Math.min(ms, this.duration));
    this.emitted = this.pos;
    this.draw();
    return this.load(Math.floor(this.pos / SEGMENT_MS));
  };

  // advance moves the playhead by ms and flies what it passes.
  Player.prototype.advance = function (ms) {
    var to = Math.min(this.pos + ms, this.duration);
    var seg = Math.floor(this.pos / SEGMENT_MS);
    for (var n = seg; n <= Math.floor(to / SEGMENT_MS); n++) {
      var cs = this.segments[n];
      if (!Array.isArray(cs)) { this.load(n); continue; }
      for (var i = 0; i < cs.length; i++) {
        var c = cs[i];
        if (c.offset >= this.emitted && c.offset < to) { this.fly(c); }
      }
    }
    this.pos = this.emitted = to;
    if ((this.pos % SEGMENT_MS) > SEGMENT_MS - PREFETCH_MS) { this.load(seg + 1); }
    if (this.pos >= this.duration) { this.playing = false; }
    this.draw();
  };

  Player.prototype.fly = function (c) {
    this.shown.push(c.id);
    var layer = $("vod-layer");
    var el = document.createElement("div");
    el.className = "dm" + (c.flags & 1 ? " high" : "");
    el.dataset.id = c.id;
    el.textContent = c.content;
    layer.appendChild(el);
    var now = performance.now(), w = el.offsetWidth, W = layer.clientWidth;
    var lane = 0;
    while (this.lanes[lane] && this.lanes[lane] > now) { lane++; }
    if ((lane + 1) * LANE_PX > layer.clientHeight) { lane = Math.floor(Math.random() * Math.max(1, layer.clientHeight / LANE_PX - 1)); }
    this.lanes[lane] = now + FLIGHT_MS * (w + 24) / (W + w);
    el.style.top = (8 + lane * LANE_PX) + "px";
    var anim = el.animate([{ transform: "translateX(" + W + "px)" }, { transform: "translateX(" + (-w) + "px)" }],
      { duration: FLIGHT_MS, easing: "linear" });
    anim.onfinish = function () { el.remove(); };
  };

  Player.prototype.draw = function () {
    $("vod-progress").style.width = (100 * this.pos / this.duration) + "%";
    $("vod-time").textContent = clock(this.pos) + " / " + clock(this.duration);
    $("vod-play").textContent = this.playing ? "pause" : "play";
  };

  // density draws the counts per bucket as a filled curve over the bar.
  Player.prototype.density = function () {
    var self = this;
    return getJSON(this.url("density", "&bucket=10s")).then(function (d) {
      var cv = $("vod-density"), w = cv.clientWidth || 600, h = cv.clientHeight || 36;
      cv.width = w; cv.height = h;
      var g = cv.getContext("2d"), max = Math.max.apply(null, d.counts.concat([1]));
      g.clearRect(0, 0, w, h);
      g.beginPath();
      g.moveTo(0, h);
      for (var i = 0; i < d.counts.length; i++) {
        g.lineTo(w * (i * d.bucketMs) / self.duration, h - (h - 2) * d.counts[i] / max);
      }
      g.lineTo(w * (d.counts.length * d.bucketMs) / self.duration, h);
      g.closePath();
      g.fillStyle = "rgba(255, 255, 255, .25)";
      g.fill();
      self.curve = d.counts;
    });
  };

  var params = new URLSearchParams(location.search);
  var manual = params.get("clock") === "manual";
  var vod = { player: null, streams: [] };
  window.DanmakuVOD = vod;

  function open(room, stream) {
    $("vod-layer").textContent = "";
    var p = new Player(room, stream);
    vod.player = p;
    $("vod-note").textContent = "#" + room + " · stream " + stream.id + " · " + stream.count + " comments";
    p.draw();
    vod.ready = Promise.all([p.seek(0), p.density()]);
    return vod.ready;
  }

  function list(room) {
    return getJSON("/logic/vod/streams?roomId=" + encodeURIComponent(room)).then(function (r) {
      vod.streams = r.streams;
      var sel = $("vod-streams");
      sel.textContent = "";
      r.streams.forEach(function (s) {
        var o = document.createElement("option");
        o.value = s.id;
        o.textContent = new Date(s.start).toLocaleString() + (s.live ? " (live)" : "") + " · " + s.count;
        sel.appendChild(o);
      });
      if (!r.streams.length) { $("vod-note").textContent = "no streams in #" + room; }
      return r.streams;
    });
  }

  function pick(room, id) {
    var s = vod.streams.filter(function (x) { return x.id === id; })[0];
    return s ? open(room, s) : Promise.reject(new Error("no stream " + id));
  }

  $("vod-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var room = $("vod-room").value;
    list(room).then(function (sts) { if (sts.length) { pick(room, sts[0].id); } });
  });
  $("vod-streams").addEventListener("change", function () { pick($("vod-room").value, this.value); });
  $("vod-play").addEventListener("click", function () {
    if (vod.player) { vod.player.playing = !vod.player.playing; vod.player.draw(); }
  });
  $("vod-bar").addEventListener("click", function (e) {
    if (!vod.player) { return; }
    var r = this.getBoundingClientRect();
    vod.player.seek(vod.player.duration * (e.clientX - r.left) / r.width);
  });

  var last = performance.now();
  function frame(now) {
    var p = vod.player;
    if (p && p.playing && !manual) { p.advance(now - last); }
    last = now;
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);

  vod.open = function (room, id) {
    $("vod-room").value = room;
    return list(room).then(function () { return pick(room, id); });
  };
  if (params.get("room") && params.get("stream")) {
    vod.opening = vod.open(params.get("room"), params.get("stream"));
  }
})();
