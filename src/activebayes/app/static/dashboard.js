// The dashboard: learning curve, training status, class balance, annotators, exports.
"use strict";

// The x axis of the learning curve: 0 .. a round number beyond the last point (room for
// the next round, so the first point is not pinned to the right edge), with integer ticks
// 1, 2 or 5 x 10^k apart. ``batch``: labels per round.
function curveAxis(labelCounts, batch) {
  const last = Math.max(0, ...labelCounts);
  const want = Math.max(last + Math.max(1, batch || 1), 4);
  let step = 1;
  for (const base of [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]) {
    step = base;
    if (want / base <= 6) break;
  }
  const max = Math.ceil(want / step) * step;
  const ticks = [];
  for (let v = 0; v <= max; v += step) ticks.push(v);
  return { max: max, ticks: ticks };
}

// The caption of the curve: one sentence per series actually drawn, naming how it is drawn
// (a line, or a dot while it has one point), or what to wait for when nothing is drawn.
// ``metric``: "accuracy", or "micro-F1" for a multi-label project.
function curveCaption(drawn, metric) {
  metric = metric || "accuracy";
  const words = {
    test: ["blue", "test " + metric + " of each round's model on the dataset's test split"],
    preq: ["orange", "prequential " + metric + ": each round's model scored on the items labelled while it ranked " +
                     "them (held out, but picked for being hard, so pessimistic)" +
                     (metric === "micro-F1" ? "; its label decisions (classes with p >= 50%) class by class" : "")],
  };
  const parts = [];
  for (const [key, count] of Object.entries(drawn)) {
    if (!count) continue;
    const shape = count === 1 ? "dot" : key === "preq" ? "dashed line" : "line";
    parts.push(words[key][0] + " " + shape + ": " + words[key][1]);
  }
  if (!parts.length) {
    return "No point yet: a point appears once a round's model has been scored, on a test split " +
           "or on the labels given after it ranked the items.";
  }
  return parts.join("; ") + ".";
}

// The stopping panel's line for one signal: its sentence, and where the loop's sentence leaves
// a number out, that number (the information ratio, the audited answers behind the interval).
function signalLine(signal) {
  let text = signal.text;
  if (signal.name === "information" && signal.ratio !== undefined && signal.ratio !== null) {
    text += " [ratio " + signal.ratio.toFixed(3) + "]";
  }
  return text;
}

(function () {
  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    return node;
  }

  function drawCurve(points, batch, metric) {
    const box = document.getElementById("curve");
    box.replaceChildren();
    const W = 640, H = 300, L = 48, R = 16, T = 12, B = 36;
    const axis = curveAxis(points.map((p) => p.n_labelled || 0), batch);
    const xmax = axis.max;
    const x = (v) => L + (W - L - R) * v / xmax;
    const y = (v) => T + (H - T - B) * (1 - v);
    for (let t = 0; t <= 1.0001; t += 0.25) {
      box.appendChild(svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }));
      const label = svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end" });
      label.textContent = Math.round(100 * t) + "%";
      box.appendChild(label);
    }
    box.appendChild(svg("line", { x1: L, x2: W - R, y1: y(0), y2: y(0), class: "axis" }));
    box.appendChild(svg("line", { x1: L, x2: L, y1: T, y2: y(0), class: "axis" }));
    for (const v of axis.ticks) {
      const label = svg("text", { x: x(v), y: H - B + 16, "text-anchor": "middle", class: "tick" });
      label.textContent = v;
      box.appendChild(label);
    }
    const caption = svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" });
    caption.textContent = "labels the model was trained on";
    box.appendChild(caption);
    const drawn = {};
    const ends = [];
    for (const [key, cls] of [["test_accuracy", "test"], ["prequential_accuracy", "preq"]]) {
      const series = points.filter((p) => p[key] !== null && p[key] !== undefined);
      drawn[cls] = series.length;
      if (!series.length) continue;
      if (series.length > 1) {
        box.appendChild(svg("polyline", { class: cls, points: series.map((p) => x(p.n_labelled) + "," + y(p[key])).join(" ") }));
      }
      for (const p of series) {
        box.appendChild(svg("circle", { cx: x(p.n_labelled), cy: y(p[key]), r: series.length > 1 ? 3 : 5, class: "dot-" + cls }));
      }
      const end = series[series.length - 1];  // the latest value, written beside its point
      const value = svg("text", { x: x(end.n_labelled) + 8, y: y(end[key]) - 8, class: "value-" + cls });
      value.textContent = AB.percent(end[key]);
      box.appendChild(value);
      ends.push(value);
    }
    const apart = AB.spread(ends.map((v) => Number(v.getAttribute("y"))), 14);
    ends.forEach((v, i) => v.setAttribute("y", apart[i]));
    if (!drawn.test && !drawn.preq) {
      const wait = svg("text", { x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle", class: "wait" });
      wait.textContent = "no " + metric + " yet: the first point comes with the first scored model";
      box.appendChild(wait);
    }
    return drawn;
  }

  // The stopping panel: a verdict, then one line per signal, all as text (never HTML).
  function renderStopping(stopping) {
    const verdict = document.getElementById("stop-verdict");
    const list = document.getElementById("stop-signals");
    const note = document.getElementById("stop-note");
    if (!stopping) {
      verdict.textContent = "";
      list.replaceChildren();
      note.textContent = "";
      return;
    }
    verdict.textContent = stopping.verdict;
    verdict.className = "verdict " + (stopping.stop ? "stop" : "go");
    verdict.dataset.stop = stopping.stop ? "yes" : "no";
    list.replaceChildren(...stopping.signals.map((s) => AB.el("li", {
      class: s.fired ? "fired" : "", "data-signal": s.name, "data-fired": s.fired ? "1" : "0" }, [
      AB.el("span", { class: "signal-title", text: s.title + (s.fired ? " · says stop" : "") }),
      AB.el("span", { class: "signal-text", text: signalLine(s) })])));
    note.textContent = stopping.n_labelled === null || stopping.n_labelled === undefined ? "" :
      "Measured on the model trained on " + stopping.n_labelled + " labels (round " + stopping.round + "), " +
      "on a fixed sample of unlabelled items; no test set needed." +
      (stopping.stop_when && stopping.stop_when.length ? " The project stops picking on: " +
       stopping.stop_when.join(", ") + "." : "");
  }

  function table(node, head, rows) {
    node.replaceChildren(AB.el("tr", {}, head.map((h) => AB.el("th", { text: h }))));
    for (const row of rows) node.appendChild(AB.el("tr", {}, row.map((c) => AB.el("td", { text: String(c) }))));
  }

  async function refresh() {
    let state;
    try { state = await AB.call("GET", "/api/state"); } catch (error) { return; }
    document.getElementById("project").textContent = state.source;
    const metric = state.multilabel ? "micro-F1" : "accuracy";
    const drawn = drawCurve(state.curve, state.batch_size, metric);
    document.getElementById("curve").setAttribute("aria-label", metric + " against labels");
    document.getElementById("curve-note").textContent = curveCaption(drawn, metric);
    AB.statusLine(document.getElementById("status"), state);
    const last = (state.status && state.status.last) || {};
    table(document.getElementById("timings"), ["last round", "seconds"], [
      ["round", last.round === undefined ? "–" : last.round],
      ["fit", AB.seconds(last.fit)], ["evaluate", AB.seconds(last.evaluate)],
      ["score + select", AB.seconds(last.acquire)], ["total", AB.seconds(last.total)]]);
    renderStopping(state.stopping);
    const c = state.counts;
    const counts = document.getElementById("counts");
    counts.replaceChildren();
    for (const [k, v] of [["items", c.items], ["labelled", c.labelled], ["rounds", state.rounds],
                          ["answers", c.answers], ["skips", c.skips], ["undos", c.undos],
                          ["held-out " + metric, AB.percent(state.accuracy.prequential)],
                          ["test " + metric, AB.percent(state.accuracy.test)]]) {
      counts.appendChild(AB.el("dt", { text: k }));
      counts.appendChild(AB.el("dd", { text: String(v) }));
    }
    const skipped = state.skipped || [];
    const note = document.getElementById("skipped");
    note.hidden = !skipped.length;
    note.textContent = skipped.length ? skipped.length + " file(s) of the folder skipped, not labelled until they " +
      "can be read: " + skipped.slice(0, 5).map((s) => s[0]).join(", ") + (skipped.length > 5 ? ", ..." : "") : "";
    note.title = skipped.map((s) => s[1]).join("\n");
    const total = state.balance.reduce((a, b) => a + b, 0) || 1;
    AB.bars(document.getElementById("balance"), state.classes.map((name, i) => ({
      name: name, value: state.balance[i] / total, label: String(state.balance[i]) })));
    table(document.getElementById("annotators"), ["annotator", "answers", "skips", "undos", "s / answer"],
      state.annotators.map((a) => [a.name, a.answers, a.skips, a.undos, a.mean_seconds === null ? "–" : a.mean_seconds.toFixed(1)]));
    const exports = document.getElementById("exports");
    exports.replaceChildren();
    for (const [fmt, href] of Object.entries(state.exports)) {
      const link = AB.el("a", { href: "#", "data-export": fmt, text: { csv: "CSV", json: "JSON", labelstudio: "Label Studio tasks (JSON)" }[fmt] });
      link.addEventListener("click", (event) => {
        event.preventDefault();
        AB.download(href, { csv: "labels.csv", json: "labels.json", labelstudio: "labelstudio-tasks.json" }[fmt]);
      });
      exports.appendChild(AB.el("li", {}, [link]));
    }
    const leases = state.leases || { count: 0, held: [] };
    document.getElementById("leases-note").textContent = leases.count + " item(s) held by " + leases.annotators +
      " annotator(s); a held item goes back to the pool after " + AB.seconds(leases.lease_seconds) + " without an answer";
    table(document.getElementById("leases"), ["annotator", "item", "held for"],
      leases.held.map((l) => [l.annotator, l.key || l.item, AB.seconds(l.seconds_left) + " more"]));
    const worker = state.worker || {};
    document.getElementById("worker-note").textContent = !worker.kind ? "" :
      "trainer: " + worker.kind + (worker.device ? " on " + worker.device : "") + (worker.restarts ? ", restarted " + worker.restarts + " time(s)" : "") +
      (worker.last_death ? "; last stopped unexpectedly: " + worker.last_death.exit + " " + worker.last_death.during : "") +
      (worker.gave_up ? "; not restarted any more (restart activebayes label)" : "");
    document.body.dataset.ready = "1";
  }

  refresh();
  setInterval(refresh, 2000);
})();
