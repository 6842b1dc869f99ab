// A run's memories, one memory (the gate's decision and reason, its utility record, who retrieved it
// and the gain of those retrievals), the retrievals behind a sharing-matrix cell, and the gate's decisions.
"use strict";

(function () {
  var h = MS.h;

  // Every retrieval of memory `id`: [{fill, row, position}], in fill order.
  function retrievalsOf(run, id) {
    var out = [];
    Object.keys(run.rows).forEach(function (f) {
      run.rows[f].forEach(function (r) {
        var k = r.r.indexOf(Number(id));
        if (k >= 0) out.push({fill: f, row: r, position: k + 1});
      });
    });
    return out;
  }

  function gainSummary(run, metric, rows) {
    var gains = rows.map(function (r) { return MS.gain(run, metric, r); }).filter(function (g) { return g !== null; });
    return gains.length ? MS.signed(MS.mean(gains), 3) + " over " + gains.length + " paired retrievals" : "no k = 0 run to pair with";
  }

  function memoriesPage(parts, query) {
    var i = parts[1];
    return MS.run(i).then(function (run) {
      MS.prepare(run);
      var ids = Object.keys(run.memories).map(Number).sort(function (a, b) { return a - b; });
      var last = run.fills.length ? String(run.fills[run.fills.length - 1]) : null, used = {};
      ((last && run.rows[last]) || []).forEach(function (r) { r.r.forEach(function (id) { used[id] = (used[id] || 0) + 1; }); });
      var agents = Array.from(new Set(ids.map(function (id) { return run.memories[id].agent; })));
      var agentSel = h("select", {id: "agent"}, h("option", {value: ""}, "all writers"),
        agents.map(function (a) { return h("option", {value: a, selected: a === query.agent ? "selected" : null}, a); }));
      var search = h("input", {id: "search", type: "search", placeholder: "search the memories' texts", value: query.q || ""});
      var list = h("tbody", {}), count = h("p", {class: "note count"});
      function draw() {
        MS.setQuery({agent: agentSel.value, q: search.value});
        var needle = search.value.toLowerCase();
        var shown = ids.filter(function (id) {
          var m = run.memories[id], t = MS.textOf(run, id);
          if (agentSel.value && m.agent !== agentSel.value) return false;
          return !needle || (t && (t.question + "\n" + t.answer).toLowerCase().indexOf(needle) >= 0);
        });
        list.textContent = "";
        shown.forEach(function (id) {
          var m = run.memories[id], t = MS.textOf(run, id), d = MS.decisionOf(run, id);
          list.appendChild(h("tr", {}, h("td", {}, MS.link(String(id), MS.route("run", i, "m", id), {class: "memory-link"})),
            h("td", {}, m.agent + (m.forgotten ? " (removed from the pool)" : "")), h("td", {}, m.origin), h("td", {}, MS.backboneOf(m)),
            h("td", {class: "num"}, m.step === undefined ? "–" : m.step),
            h("td", {class: "num"}, d && d.score !== undefined ? MS.num(d.score, 2) : "–"),
            h("td", {class: "num"}, d && d.utility ? MS.signed(d.utility.u, 3) : "–"), h("td", {class: "num"}, used[id] || 0),
            h("td", {}, t ? MS.excerpt(t.question, 100) : "(no text)")));
        });
        count.textContent = shown.length + " of " + ids.length + " memories shown";
      }
      agentSel.addEventListener("change", draw);
      search.addEventListener("input", draw);
      draw();
      return h("div", {}, MS.runHeader(run, i, "memories"), h("div", {class: "controls"}, agentSel, search), count,
        h("div", {class: "scroll"}, h("table", {class: "memories"}, h("thead", {}, h("tr", {}, ["id", "writer", "origin", "backbone", "step",
          "gate score", "utility", "retrievals at " + last + "%", "question"].map(function (c) { return h("th", {}, c); }))), list)));
    });
  }

  function utilitySection(run, i, id) {
    var d = MS.decisionOf(run, id), m = run.memories[id], items = [];
    if (d && d.utility) {
      var u = d.utility;
      items.push(h("p", {}, "Measured by the gate as a candidate: u = " + MS.ci(u.u, u.lo, u.hi, 4) + " nats per token over " +
        (u.probes || []).length + " probes (" + (u.shots || "?") + " shots)."));
      items.push(MS.table(["probe memory", "delta", "shot it displaced"], (u.probes || []).map(function (p, k) {
        return h("tr", {}, h("td", {}, MS.link(String(p), MS.route("run", i, "m", p))), h("td", {class: "num"}, MS.signed(u.deltas[k], 4)),
                 h("td", {}, u.displaced[k] === null ? "–" : MS.link(String(u.displaced[k]), MS.route("run", i, "m", u.displaced[k]))));
      })));
    }
    var displaced = [];
    run.decisions.forEach(function (x) {
      if (!x.utility || !x.utility.displaced) return;
      x.utility.displaced.forEach(function (shot, k) {
        if (shot === Number(id)) displaced.push(h("tr", {}, h("td", {class: "num"}, x.step), h("td", {}, x.agent),
          h("td", {}, x.memory_id === undefined ? "rejected candidate" : MS.link("memory " + x.memory_id, MS.route("run", i, "m", x.memory_id))),
          h("td", {class: "num"}, MS.signed(-x.utility.deltas[k], 4))));
      });
    });
    if (displaced.length) items.push(h("p", {}, "As a shot a later candidate displaced in a probe's prompt (its value: minus the candidate's delta):"),
      MS.table(["step", "agent", "candidate", "value"], displaced));
    if (m.pool_utility) items.push(h("p", {}, "The pool's running mean: " + MS.signed(m.pool_utility.mean, 4) + " over " + m.pool_utility.n + " measurements."));
    if (!items.length) items.push(MS.note("No utility was measured for this memory (the run's gate did not measure utility, or never used it as a shot)."));
    return items;
  }

  function memoryPage(parts) {
    var i = parts[1], id = parts[3];
    return MS.run(i).then(function (run) {
      MS.prepare(run);
      if (!run.memories[id]) return h("div", {}, MS.runHeader(run, i, ""), MS.note("Memory " + id + " is not among this run's records."));
      var m = run.memories[id], d = MS.decisionOf(run, id), metric = MS.data.site.metric, found = retrievalsOf(run, id);
      var gate = d ? MS.table(["accepted", "reason", "score", "read", "step", "pool size"], [h("tr", {},
          h("td", {}, d.accepted ? "yes" : "no"), h("td", {class: "reason"}, d.reason || "–"), h("td", {class: "num"}, MS.num(d.score, 2)),
          h("td", {}, d.read || "–"), h("td", {class: "num"}, d.step), h("td", {class: "num"}, d.pool_size === undefined ? "–" : d.pool_size))])
        : MS.note(m.origin === "seed" || m.origin === "imported" ? "A seed pair (the data's own): no gate judged it."
                                                                 : "No decision for it in this run's decisions.jsonl (another run admitted it, or the policy wrote it).");
      var byFill = {};
      found.forEach(function (x) { (byFill[x.fill] = byFill[x.fill] || []).push(x); });
      var summary = Object.keys(byFill).map(function (f) {
        var agents = {};
        byFill[f].forEach(function (x) { var a = run.tests[x.row.t][0]; agents[a] = (agents[a] || 0) + 1; });
        return h("li", {}, f + "% fill: " + byFill[f].length + " retrievals (" + Object.keys(agents).map(function (a) { return a + " " + agents[a]; }).join(", ") +
                 "); mean gain in " + MS.metricLabel(metric) + ": " + gainSummary(run, metric, byFill[f].map(function (x) { return x.row; })));
      });
      var rows = found.map(function (x) {
        var t = run.tests[x.row.t];
        return h("tr", {}, h("td", {class: "num"}, x.fill), h("td", {}, MS.link(t[1], MS.route("run", i, "q", x.fill, x.row.t))), h("td", {}, t[0]),
                 h("td", {class: "num"}, x.position), run.baseline ? h("td", {class: "num"}, MS.signed(MS.gain(run, metric, x.row), 3)) : null);
      });
      return h("div", {}, MS.runHeader(run, i, ""), h("h2", {}, "Memory " + id),
        MS.memoryCard(run, i, id, false, true),
        h("h3", {}, "The gate's decision"), gate,
        h("h3", {}, "Utility"), utilitySection(run, i, id),
        h("h3", {}, "Retrievals (" + found.length + ")"),
        found.length ? [h("ul", {}, summary), MS.table(["fill", "test question", "retrieving agent", "rank"].concat(
                          run.baseline ? ["gain vs k = 0 (" + MS.metricLabel(metric) + ")"] : []), rows, {class: "retrievals"})]
                     : MS.note("No test question retrieved it."));
    });
  }

  function cellPage(parts) {
    var i = parts[1], row = parts[3], column = parts[4], site = MS.data.site;
    return MS.run(i).then(function (run) {
      MS.prepare(run);
      var s = run.sharing || {}, cells = ((s.cells || {})[row] || {})[column];
      if (!cells) return h("div", {}, MS.runHeader(run, i, ""), MS.note("This cell holds no retrievals."));
      var f = String(s.fill), gains = [], weights = [];
      var items = cells.map(function (c) {
        var r = run._row[f][c[0]], t = run.tests[c[0]], g = MS.gain(run, s.metric, r), inCell = {};
        c[1].forEach(function (id) { inCell[id] = true; });
        if (g !== null) { gains.push(g * c[1].length); weights.push(c[1].length); }
        return h("div", {class: "retrieval", "data-test": t[1]},
          h("p", {}, MS.link(t[1], MS.route("run", i, "q", f, c[0]), {class: "question-link"}), " (" + t[0] + "): " + c[1].length +
            " of its " + r.r.length + " memories in this cell" + (run.baseline ? "; gain vs k = 0: " + MS.signed(g, 3) : "")),
          h("p", {class: "note"}, MS.excerpt(MS.questionOf(run, r), 200)),
          r.r.map(function (id) { return MS.memoryCard(run, i, id, inCell[id]); }));
      });
      var n = weights.reduce(function (a, b) { return a + b; }, 0), g = ((site.sharing[i] || {}).gains || {})[row] || {};
      return h("div", {}, MS.runHeader(run, i, ""),
        h("h2", {class: "cell-title"}, "Retrievals by " + (row === s.everyone ? "all agents" : row) + " of memories of " + (column === s.everyone ? "any writer" : column)),
        MS.note(cells.reduce(function (a, c) { return a + c[1].length; }, 0) + " retrievals in " + cells.length + " test questions at " + f +
                "% fill. " + (s.baseline ? "Mean gain in " + MS.metricLabel(s.metric) + " against k = 0 (each question weighted by its memories " +
                "in the cell): " + (n ? MS.signed(gains.reduce(function (a, b) { return a + b; }, 0) / n, 3) : "–") + "; the matrix's, with its 95% CI: " +
                MS.ci((g[column] || [])[0], (g[column] || [])[1], (g[column] || [])[2], 3) + ". " : "No k = 0 run to measure a gain against. ") +
                "Highlighted: the memories this cell counts."),
        items);
    });
  }

  function decisionsPage(parts, query) {
    var i = parts[1];
    return MS.run(i).then(function (run) {
      MS.prepare(run);
      var rows = run.decisions.map(function (d) {
        return h("tr", {class: d.accepted ? "accepted" : "rejected"}, h("td", {class: "num"}, d.step),
          h("td", {}, d.writer ? d.writer + " (poisoner, on " + d.agent + "'s question)" : d.agent),
          h("td", {}, d.accepted ? "admitted" : "rejected"), h("td", {class: "num"}, d.score === undefined ? "–" : MS.num(d.score, 2)),
          h("td", {class: "num"}, d.utility ? MS.signed(d.utility.u, 3) : "–"), h("td", {class: "reason"}, d.reason || ""),
          h("td", {}, d.memory_id === undefined ? "–" : MS.link(String(d.memory_id), MS.route("run", i, "m", d.memory_id))),
          h("td", {}, h("details", {}, h("summary", {}, MS.excerpt(d.question, 90)), h("h4", {}, "answer"), MS.pre(d.answer || ""))));
      });
      return h("div", {}, MS.runHeader(run, i, "gate"),
        run.decisions.length ? h("div", {class: "scroll"}, MS.table(["step", "agent", "decision", "score", "utility", "reason", "memory", "question and answer"], rows, {class: "decisions"}))
                             : MS.note("No gate decisions: this run streamed nothing (k = 0), or its folder holds no decisions.jsonl."));
    });
  }

  MS.routes.push({name: "memories", match: function (p) { return p[0] === "run" && p[2] === "memories"; }, show: memoriesPage});
  MS.routes.push({name: "memory", match: function (p) { return p[0] === "run" && p[2] === "m" && p.length === 4; }, show: memoryPage});
  MS.routes.push({name: "cell", match: function (p) { return p[0] === "run" && p[2] === "cell" && p.length === 5; }, show: cellPage});
  MS.routes.push({name: "decisions", match: function (p) { return p[0] === "run" && p[2] === "decisions"; }, show: decisionsPage});
})();
