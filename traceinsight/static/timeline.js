/* traceinsight timeline: CPU threads and GPU streams of one step on a canvas. No libraries.
 *
 * Data: the dict from traceinsight.render.timeline.timeline_data() (see that module's docstring):
 *   {duration_us, names[], classes[], palette{}, labels{}, rows: [{id, group, label, items: [[start_us,
 *    dur_us, name_id, class_id, n_events], ...]}], ...}. Times are us from the step start.
 *
 * API (window.TraceInsightTimeline):
 *   render(container, data, opts) -> Timeline
 *       Draws into `container` (an empty block element). opts (all optional):
 *         domain: [t0_us, t1_us]   initial and "reset" view (default [0, data.duration_us])
 *         rowHeight: 24, labelWidth: 220 (px)
 *         legend: true             draw the color legend under the canvas
 *         title: ""                a caption above the canvas
 *   group() -> Group               a shared time axis: group.add(timeline) syncs the view of every
 *                                  member on zoom/pan (use a common `domain` for aligned timelines).
 *   renderAll(root = document)     renders every element with class "ti-timeline" and attribute
 *                                  data-timeline-src="ID", ID being the id of a script element of type
 *                                  application/json holding the data;
 *                                  elements with the same data-timeline-group share one Group.
 *                                  data-timeline-domain="t0,t1" sets opts.domain. Returns the
 *                                  Timelines. Called automatically on DOMContentLoaded.
 *   instances                      every Timeline rendered so far, in order.
 *   Timeline: .setView(t0, t1), .getView() -> [t0, t1], .resetView(), .redraw(), .itemsDrawn,
 *             .linked(rowIndex, itemIndex) -> [{row, index}] (the launch call and the GPU work it
 *             launched: items whose sixth element, the link, is the same),
 *             .data, .container, .pointFor(rowIndex, itemIndex) -> {x, y, name} (viewport
 *             coordinates of an item's visible middle, or null). After each draw the container gets data-items-drawn="<N>"
 *             (rectangles drawn in the current view), data-ticks="0|5 ms|10 ms" (the axis labels),
 *             data-linked="<N>" (items linked to the hovered one) and data-ready="1".
 * Interaction: wheel zooms around the cursor, drag pans, double-click resets, hover shows a
 * tooltip (name, start, duration, row; for a launch call the work it launched and for GPU work the
 * call that launched it, both outlined and joined by an arrow; over a row label, the full label).
 * Axis labels are short ("20 ms", "2.5 ms", "500 us"). Every trace string is drawn with fillText or set with
 * textContent; no HTML is ever parsed from the data.
 */
(function () {
  "use strict";

  var AXIS_H = 24;

  // Fixed decimals, trailing zeros dropped: 20 ms, 2.5 ms, 0.125 ms.
  function trim(x, nd) {
    var s = x.toFixed(nd);
    if (s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    return s === "-0" ? "0" : s;
  }

  function fmtUs(us) {
    var a = Math.abs(us);
    if (a === 0) return "0";
    if (a >= 1e6) return trim(us / 1e6, 3) + " s";
    if (a >= 1000) return trim(us / 1000, 3) + " ms";
    if (a >= 1) return trim(us, 1) + " us";
    return (us * 1000).toFixed(0) + " ns";
  }

  // An axis label: the unit of the tick spacing, as many decimals as the spacing needs.
  function fmtTick(us, step) {
    if (us === 0) return "0";
    var unit = step >= 1e6 ? [1e6, " s"] : (step >= 1000 ? [1000, " ms"] : [1, " us"]);
    var nd = Math.max(0, Math.ceil(-Math.log10(step / unit[0]) - 1e-9));
    return trim(us / unit[0], Math.min(nd, 6)) + unit[1];
  }

  function tickStep(span, px) {
    var target = span / Math.max(2, px / 110);
    var p = Math.pow(10, Math.floor(Math.log10(target)));
    var m = [1, 2, 5, 10];
    for (var i = 0; i < m.length; i++) if (m[i] * p >= target) return m[i] * p;
    return 10 * p;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // link -> [{row, index}]: a launch call and the GPU work it launched share one link number.
  function prepLinks(rows) {
    var links = {};
    rows.forEach(function (R, ri) {
      R.items.forEach(function (it, i) {
        if (it.length > 5) (links[it[5]] = links[it[5]] || []).push({row: ri, index: i});
      });
    });
    return links;
  }

  function prepRows(data) {
    return (data.rows || []).map(function (r) {
      var items = r.items || [];
      var maxEnd = new Float64Array(items.length);
      var m = -Infinity;
      for (var i = 0; i < items.length; i++) {
        var e = items[i][0] + items[i][1];
        if (e > m) m = e;
        maxEnd[i] = m;
      }
      return {row: r, items: items, maxEnd: maxEnd};
    });
  }

  // First index whose prefix max end >= t (items that may overlap [t, ...)).
  function firstEndingAfter(maxEnd, t) {
    var lo = 0, hi = maxEnd.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (maxEnd[mid] < t) lo = mid + 1; else hi = mid; }
    return lo;
  }
  // One past the last index whose start <= t.
  function lastStartingBefore(items, t) {
    var lo = 0, hi = items.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (items[mid][0] <= t) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function Timeline(container, data, opts) {
    opts = opts || {};
    this.container = container;
    this.data = data;
    this.rowHeight = opts.rowHeight || 24;
    this.labelWidth = opts.labelWidth || 220;
    var dur = Math.max(data.duration_us || 0, 1e-3);
    this.domain = opts.domain ? [opts.domain[0], opts.domain[1]] : [0, dur];
    this.view = [this.domain[0], this.domain[1]];
    this.rows = prepRows(data);
    this.links = prepLinks(this.rows);
    this.itemsDrawn = 0;
    this.groupRef = null;
    this.hover = null;
    container.classList.add("ti-tl");
    container.textContent = "";
    if (opts.title) container.appendChild(el("div", "ti-tl-title", opts.title));
    var hint = el("div", "ti-tl-hint",
      "Wheel: zoom \u00b7 drag: pan \u00b7 double-click: reset \u00b7 times are from the step start");
    container.appendChild(hint);
    this.wrap = el("div", "ti-tl-wrap");
    this.wrap.style.position = "relative";
    container.appendChild(this.wrap);
    this.canvas = el("canvas", "ti-tl-canvas");
    this.canvas.style.display = "block";
    this.canvas.style.width = "100%";
    this.canvas.style.cursor = "grab";
    this.wrap.appendChild(this.canvas);
    this.tip = el("div", "ti-tl-tip");
    this.tip.style.position = "absolute";
    this.tip.style.display = "none";
    this.tip.style.pointerEvents = "none";
    this.tip.setAttribute("role", "tooltip");
    this.wrap.appendChild(this.tip);
    if (opts.legend !== false) this._legend();
    if (data.items_kept < data.items_total || data.dropped) {
      container.appendChild(el("div", "ti-tl-note",
        "Showing " + data.items_kept + " of " + data.items_total + " events: events shorter than " +
        fmtUs(data.merge_resolution_us) + " were merged per row and class" +
        (data.dropped ? "; " + data.dropped + " shortest dropped" : "") + "."));
    }
    this._bind();
    var self = this;
    this._scheduled = false;
    if (window.ResizeObserver) {
      new ResizeObserver(function () { self.redraw(); }).observe(this.wrap);
    } else {
      window.addEventListener("resize", function () { self.redraw(); });
    }
    this._draw();
  }

  Timeline.prototype._legend = function () {
    var data = this.data, used = {};
    this.rows.forEach(function (r) { r.items.forEach(function (it) { used[it[3]] = true; }); });
    var box = el("div", "ti-tl-legend");
    (data.classes || []).forEach(function (c, i) {
      if (!used[i]) return;
      var item = el("span", "ti-tl-legend-item");
      var sw = el("span", "ti-tl-swatch");
      sw.style.background = (data.palette || {})[c] || "#999";
      item.appendChild(sw);
      item.appendChild(document.createTextNode(((data.labels || {})[c]) || c));
      box.appendChild(item);
    });
    this.container.appendChild(box);
  };

  Timeline.prototype.getView = function () { return [this.view[0], this.view[1]]; };

  Timeline.prototype.setView = function (t0, t1, _fromGroup) {
    var span = t1 - t0;
    if (!(span > 0)) return;
    if (span < 0.05) { var c = (t0 + t1) / 2; t0 = c - 0.025; t1 = c + 0.025; }
    this.view = [t0, t1];
    this.redraw();
    if (this.groupRef && !_fromGroup) this.groupRef._sync(this);
  };

  Timeline.prototype.resetView = function () { this.setView(this.domain[0], this.domain[1]); };

  Timeline.prototype.redraw = function () {
    var self = this;
    if (this._scheduled) return;
    this._scheduled = true;
    (window.requestAnimationFrame || function (f) { return setTimeout(f, 16); })(function () {
      self._scheduled = false;
      self._draw();
    });
  };

  Timeline.prototype._xOf = function (t, W) {
    return this.labelWidth + (t - this.view[0]) * (W - this.labelWidth) / (this.view[1] - this.view[0]);
  };
  Timeline.prototype._tOf = function (x, W) {
    return this.view[0] + (x - this.labelWidth) * (this.view[1] - this.view[0]) / (W - this.labelWidth);
  };

  Timeline.prototype._draw = function () {
    var W = Math.max(300, this.wrap.clientWidth || 800);
    var H = AXIS_H + this.rows.length * this.rowHeight + 4;
    var dpr = window.devicePixelRatio || 1;
    var cv = this.canvas;
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
      cv.width = Math.round(W * dpr);
      cv.height = Math.round(H * dpr);
      cv.style.height = H + "px";
    }
    var ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = "11px system-ui, -apple-system, Segoe UI, sans-serif";
    ctx.textBaseline = "middle";
    var L = this.labelWidth, v0 = this.view[0], v1 = this.view[1];
    var k = (W - L) / (v1 - v0);
    var data = this.data, pal = data.palette || {}, cls = data.classes || [], names = data.names || [];
    var rh = this.rowHeight;

    // Outside the step window: shaded.
    var dur = data.duration_us || 0;
    ctx.fillStyle = "#f1f1f1";
    var xs = this._xOf(0, W), xe = this._xOf(dur, W);
    if (xs > L) ctx.fillRect(L, AXIS_H, Math.min(xs, W) - L, H - AXIS_H);
    if (xe < W) ctx.fillRect(Math.max(xe, L), AXIS_H, W - Math.max(xe, L), H - AXIS_H);

    // Axis and grid.
    var step = tickStep(v1 - v0, W - L);
    ctx.strokeStyle = "#e4e4e4";
    ctx.fillStyle = "#444";
    ctx.lineWidth = 1;
    ctx.textAlign = "left";
    var ticks = [];
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = Math.round(this._xOf(t, W)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, H); ctx.stroke();
      var tl = fmtTick(Math.abs(t) < step / 1e6 ? 0 : t, step), tw = ctx.measureText(tl).width;
      ctx.fillText(tl, x + 3 + tw > W ? x - 3 - tw : x + 3, AXIS_H / 2 - 2);
      ticks.push(tl);
    }
    this.container.setAttribute("data-ticks", ticks.join("|"));
    ctx.strokeStyle = "#999";
    ctx.beginPath(); ctx.moveTo(L, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();

    // Rows.
    var drawn = 0, prevGroup = null;
    for (var ri = 0; ri < this.rows.length; ri++) {
      var R = this.rows[ri], y = AXIS_H + ri * rh;
      if (ri % 2 === 1) { ctx.fillStyle = "rgba(0,0,0,0.025)"; ctx.fillRect(L, y, W - L, rh); }
      if (prevGroup !== null && R.row.group !== prevGroup) {
        ctx.strokeStyle = "#888";
        ctx.beginPath(); ctx.moveTo(0, y + 0.5); ctx.lineTo(W, y + 0.5); ctx.stroke();
      }
      prevGroup = R.row.group;
      ctx.save();
      ctx.beginPath(); ctx.rect(L, y, W - L, rh); ctx.clip();
      var i0 = firstEndingAfter(R.maxEnd, v0), i1 = lastStartingBefore(R.items, v1);
      var lastX = -1, lastC = -1;
      for (var i = i0; i < i1; i++) {
        var it = R.items[i];
        if (it[0] + it[1] < v0) continue;
        var x0 = L + (it[0] - v0) * k, w = it[1] * k;
        if (w < 1) {
          // Sub-pixel items: one 1px mark per pixel column and class.
          var px = Math.floor(x0);
          if (px === lastX && it[3] === lastC) continue;
          lastX = px; lastC = it[3];
          w = 1; x0 = px;
        }
        ctx.fillStyle = pal[cls[it[3]]] || "#999";
        var top = R.row.group === "idle" ? y + 1 : y + 2, hh = R.row.group === "idle" ? rh - 2 : rh - 4;
        ctx.fillRect(x0, top, w, hh);
        drawn++;
        if (w > 40) {
          var vx = Math.max(x0, L) + 2, vw = Math.min(x0 + w, W) - vx - 2;
          if (vw > 24) {
            var s = names[it[2]] || "";
            var maxc = Math.floor(vw / 6);
            if (s.length > maxc) s = s.slice(0, Math.max(1, maxc - 1)) + "\u2026";
            ctx.fillStyle = "#fff";
            ctx.fillText(s, vx, y + rh / 2);
          }
        }
      }
      if (this.hover && this.hover.item && this.hover.row === ri) {
        var h = this.hover.item;
        ctx.strokeStyle = "#000";
        ctx.lineWidth = 1.5;
        ctx.strokeRect(L + (h[0] - v0) * k, y + 1, Math.max(1, h[1] * k), rh - 2);
        ctx.lineWidth = 1;
      }
      ctx.restore();
      // Row label.
      ctx.fillStyle = R.row.group === "idle" ? "#7a3b00" : (R.row.group === "gpu" ? "#1d5a2a" : "#233");
      var lab = R.row.label || "";
      var mx = Math.floor((L - 8) / 6);
      if (lab.length > mx) lab = lab.slice(0, mx - 1) + "\u2026";
      ctx.fillText(lab, 4, y + rh / 2);
    }
    ctx.strokeStyle = "#bbb";
    ctx.beginPath(); ctx.moveTo(L - 0.5, 0); ctx.lineTo(L - 0.5, H); ctx.stroke();
    this._drawLinks(ctx, W, k);
    this.itemsDrawn = drawn;
    this.container.setAttribute("data-items-drawn", String(drawn));
    this.container.setAttribute("data-ready", "1");
  };

  Timeline.prototype.linked = function (rowIndex, i) {
    var R = this.rows[rowIndex], it = R && R.items[i];
    if (!it || it.length < 6) return [];
    return (this.links[it[5]] || []).filter(function (p) { return p.row !== rowIndex || p.index !== i; });
  };

  // On hover: outline the launch call and the GPU work it launched, and join them with an arrow.
  Timeline.prototype._drawLinks = function (ctx, W, k) {
    var h = this.hover, L = this.labelWidth, v0 = this.view[0], rh = this.rowHeight, self = this;
    if (!h || h.index === undefined) { this.container.setAttribute("data-linked", "0"); return; }
    var partners = this.linked(h.row, h.index);
    this.container.setAttribute("data-linked", String(partners.length));
    if (!partners.length) return;
    var mid = function (row, it) {
      var x0 = Math.max(L, L + (it[0] - v0) * k), x1 = Math.min(W, L + (it[0] + it[1] - v0) * k);
      return {x0: x0, x1: Math.max(x0 + 1, x1), y: AXIS_H + row * rh + rh / 2};
    };
    var a = mid(h.row, h.item);
    ctx.save();
    ctx.strokeStyle = "#111";
    ctx.lineWidth = 1.5;
    partners.forEach(function (p) {
      var it = self.rows[p.row].items[p.index], b = mid(p.row, it);
      ctx.strokeRect(b.x0, b.y - rh / 2 + 1, b.x1 - b.x0, rh - 2);
      // From the call (the earlier row) to the work it launched.
      var from = p.row > h.row ? a : b, to = p.row > h.row ? b : a;
      var fx = Math.min(Math.max(from.x0, L), W), tx = Math.min(Math.max(to.x0, L), W);
      ctx.beginPath(); ctx.moveTo(fx, from.y + rh / 2 - 2); ctx.lineTo(tx, to.y - rh / 2 + 2); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(tx, to.y - rh / 2 + 2); ctx.lineTo(tx - 4, to.y - rh / 2 - 5);
      ctx.lineTo(tx + 4, to.y - rh / 2 - 5); ctx.closePath(); ctx.fillStyle = "#111"; ctx.fill();
    });
    ctx.restore();
  };

  Timeline.prototype._hit = function (mx, my) {
    var W = this.wrap.clientWidth || 800;
    var ri = Math.floor((my - AXIS_H) / this.rowHeight);
    if (ri < 0 || ri >= this.rows.length) return null;
    if (mx < this.labelWidth) return {row: ri, label: true};
    var R = this.rows[ri], t = this._tOf(mx, W);
    var tol = 2 * (this.view[1] - this.view[0]) / (W - this.labelWidth);
    var j = lastStartingBefore(R.items, t + tol) - 1, best = null, bi = -1;
    for (; j >= 0 && R.maxEnd[j] >= t - tol; j--) {
      var it = R.items[j];
      if (it[0] - tol <= t && it[0] + it[1] + tol >= t) {
        if (!best || it[1] < best[1]) { best = it; bi = j; }
      }
    }
    return best ? {row: ri, item: best, index: bi} : null;
  };

  Timeline.prototype._showTip = function (hit, mx, my) {
    var tip = this.tip;
    if (!hit) { tip.style.display = "none"; return; }
    var d = this.data, it = hit.item, R = this.rows[hit.row].row;
    tip.textContent = "";
    if (hit.label) {  // a row label, cut to fit: the full one
      tip.appendChild(el("div", "ti-tl-tip-name", R.label || ""));
      return this._placeTip(mx, my);
    }
    tip.appendChild(el("div", "ti-tl-tip-name", d.names[it[2]] || ""));
    tip.appendChild(el("div", null, "start: " + fmtUs(it[0]) + " after the step start"));
    tip.appendChild(el("div", null, "duration: " + fmtUs(it[1])));
    var c = (d.classes || [])[it[3]];
    tip.appendChild(el("div", "ti-tl-tip-row",
      (R.label || "") + " \u00b7 " + (((d.labels || {})[c]) || c) + (it[4] > 1 ? " \u00b7 " + it[4] + " events" : "")));
    var self = this;
    this.linked(hit.row, hit.index).slice(0, 3).forEach(function (p) {
      var o = self.rows[p.row].items[p.index], name = d.names[o[2]] || "";
      var launch = p.row < hit.row;  // the call sits above the GPU work it launched
      var gap = launch ? it[0] - o[0] : o[0] - it[0];
      tip.appendChild(el("div", "ti-tl-tip-link", (launch ? "launched by " : "launches ") + name +
        (launch ? " (" + fmtUs(gap) + " earlier)" : " (starts " + fmtUs(gap) + " after the call)")));
    });
    this._placeTip(mx, my);
  };

  Timeline.prototype._placeTip = function (mx, my) {
    var tip = this.tip;
    tip.style.display = "block";
    var W = this.wrap.clientWidth || 800;
    var tw = tip.offsetWidth || 300;
    var th = tip.offsetHeight || 60, H = this.canvas.clientHeight || 200;
    tip.style.left = Math.max(0, Math.min(mx + 12, W - tw - 4)) + "px";
    // Below the pointer when it fits inside the timeline, else above it.
    tip.style.top = (my + 14 + th <= H ? my + 14 : Math.max(0, my - th - 10)) + "px";
  };

  Timeline.prototype._bind = function () {
    var self = this, cv = this.canvas, drag = null;
    function pos(ev) {
      var r = cv.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    }
    cv.addEventListener("wheel", function (ev) {
      var p = pos(ev), W = self.wrap.clientWidth || 800;
      if (p[0] < self.labelWidth) return;
      ev.preventDefault();
      var t = self._tOf(p[0], W);
      var dy = ev.deltaMode === 1 ? ev.deltaY * 16 : ev.deltaY;
      var f = Math.exp(Math.max(-2, Math.min(2, dy * 0.0015)));
      var v = self.view;
      self.setView(t - (t - v[0]) * f, t + (v[1] - t) * f);
    }, {passive: false});
    cv.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      drag = {x: ev.clientX, view: self.getView()};
      cv.style.cursor = "grabbing";
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var W = self.wrap.clientWidth || 800;
      var dt = (ev.clientX - drag.x) * (drag.view[1] - drag.view[0]) / (W - self.labelWidth);
      self.setView(drag.view[0] - dt, drag.view[1] - dt);
    });
    window.addEventListener("mouseup", function () {
      if (drag) { drag = null; cv.style.cursor = "grab"; }
    });
    cv.addEventListener("mousemove", function (ev) {
      if (drag) { self.tip.style.display = "none"; return; }
      var p = pos(ev), hit = self._hit(p[0], p[1]);
      var changed = (hit ? hit.item || hit.row : null) !== (self.hover ? self.hover.item || self.hover.row : null);
      self.hover = hit;
      self._showTip(hit, p[0], p[1]);
      if (changed) self.redraw();
    });
    cv.addEventListener("mouseleave", function () {
      self.tip.style.display = "none";
      if (self.hover) { self.hover = null; self.redraw(); }
    });
    cv.addEventListener("dblclick", function () { self.resetView(); });
  };

  function Group() { this.members = []; }
  Group.prototype.add = function (tl) {
    this.members.push(tl);
    tl.groupRef = this;
    if (this.members.length > 1) {
      var v = this.members[0].getView();
      tl.setView(v[0], v[1], true);
    }
    return tl;
  };
  Group.prototype._sync = function (src) {
    var v = src.getView();
    this.members.forEach(function (m) { if (m !== src) m.setView(v[0], v[1], true); });
  };

  // Client (viewport) coordinates of the middle of the visible part of item `i` of row `rowIndex`,
  // or null when it is out of view: lets tests and other code point at an item.
  Timeline.prototype.pointFor = function (rowIndex, i) {
    var R = this.rows[rowIndex];
    if (!R || !R.items[i]) return null;
    var it = R.items[i], W = this.wrap.clientWidth || 800;
    var a = Math.max(this._xOf(it[0], W), this.labelWidth), b = Math.min(this._xOf(it[0] + it[1], W), W);
    if (b < a) return null;
    var r = this.canvas.getBoundingClientRect();
    return {x: r.left + (a + b) / 2, y: r.top + AXIS_H + rowIndex * this.rowHeight + this.rowHeight / 2,
            name: this.data.names[it[2]] || ""};
  };

  var instances = [];
  function render(container, data, opts) {
    var tl = new Timeline(container, data, opts);
    instances.push(tl);
    return tl;
  }

  function renderAll(root) {
    root = root || document;
    var groups = {}, out = [];
    var nodes = root.querySelectorAll(".ti-timeline[data-timeline-src]");
    for (var i = 0; i < nodes.length; i++) {
      var node = nodes[i];
      if (node.getAttribute("data-ready") === "1") continue;
      var src = document.getElementById(node.getAttribute("data-timeline-src"));
      if (!src) continue;
      var data;
      try { data = JSON.parse(src.textContent); } catch (e) { node.textContent = "timeline data unreadable"; continue; }
      var opts = {};
      var dom = node.getAttribute("data-timeline-domain");
      if (dom) {
        var p = dom.split(",").map(Number);
        if (p.length === 2 && p[1] > p[0]) opts.domain = p;
      }
      var tl = render(node, data, opts);
      var g = node.getAttribute("data-timeline-group");
      if (g) { (groups[g] = groups[g] || new Group()).add(tl); }
      out.push(tl);
    }
    return out;
  }

  window.TraceInsightTimeline = {
    render: render, renderAll: renderAll, group: function () { return new Group(); }, instances: instances,
    formatUs: fmtUs, formatTick: fmtTick, version: 2
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { renderAll(document); });
  } else {
    renderAll(document);
  }
})();
