// A run's test questions (filterable by agent, searchable by text) and one question: its prompt, the
// memories it retrieved and who wrote them, the answer beside the reference, and every value recorded.
"use strict";

(function () {
  var h = MS.h;

  // Indexes a run's data once: memory id -> the gate's decision; fill -> test index -> row.
  MS.prepare = function (run) {
    if (run._ready) return run;
    run._decision = {};
    run.decisions.forEach(function (d, i) { if (d.memory_id !== undefined) run._decision[d.memory_id] = i; });
    run._row = {};
    Object.keys(run.rows).forEach(function (f) {
      run._row[f] = {};
      run.rows[f].forEach(function (r) { run._row[f][r.t] = r; });
    });
    run._ready = true;
    return run;
  };
  MS.decisionOf = function (run, id) { var i = run._decision[id]; return i === undefined ? null : run.decisions[i]; };
  MS.textOf = function (run, id) {
    var m = run.memories[id];
    return m && m.question !== undefined ? m : null;
  };
  MS.questionOf = function (run, row) { return row.q !== undefined ? row.q : run.tests[row.t][2]; };
  MS.referenceOf = function (run, row) { return row.ref !== undefined ? row.ref : run.tests[row.t][3]; };
  MS.baseValue = function (run, metric, t) {
    var b = run.baseline && run.baseline.values[metric];
    return b && b[t] !== undefined ? b[t] : null;
  };
  MS.gain = function (run, metric, row) {
    var base = MS.baseValue(run, metric, row.t), v = row.m[metric];
    if (base === null || v === undefined) return null;
    return MS.higherIsBetter(metric) ? v - base : base - v;
  };

  function formatParts(template, values) {
    return template.map(function (p) { return typeof p === "string" ? p : values[p.field]; }).join("");
  }
  // The chat the agent's backbone got, rebuilt as ms.agents.PromptTemplate.render and chat build it.
  MS.prompt = function (run, row) {
    var spec = run.prompt;
    if (!spec) return {why: "the prompt cannot be rebuilt: " + run.prompt_missing};
    var shots = [];
    for (var i = 0; i < row.r.length; i++) {
      var m = MS.textOf(run, row.r[i]);
      if (!m) return {why: "the prompt cannot be rebuilt: memory " + row.r[i] + " has no text in the run's files"};
      shots.push(formatParts(spec.example, {question: m.question, answer: m.answer}));
    }
    var query = MS.questionOf(run, row);
    var user = shots.length ? formatParts(spec.with_examples, {examples: shots.join(spec.separator), query: query})
                            : formatParts(spec.zero_shot, {query: query});
    var agent = run.tests[row.t][0], messages = [];
    if (spec.system) messages.push({role: "system", content: spec.instructions[agent] || ""});
    messages.push({role: "user", content: user});
    return {messages: messages};
  };

  // Who wrote a memory and with what, as its record says: a poisoner's pair was written by no model.
  MS.backboneOf = function (m) { return m.poisoner ? "none (a poisoning writer's pair, drawn from the data)" : (m.backbone || "?"); };

  MS.memoryCard = function (run, runIndex, id, highlight, open) {
    var m = run.memories[id] || {}, d = MS.decisionOf(run, id), seed = m.origin === "seed" || m.origin === "imported";
    var facts = [["writer", (m.agent || "?") + (m.poisoner ? " (poisoner)" : "")], ["backbone", MS.backboneOf(m)], ["origin", m.origin || "?"],
                 ["admitted at step", m.step === undefined ? "?" : m.step],
                 ["gate score", d && d.score !== undefined ? MS.num(d.score, 2) : (m.score !== undefined ? MS.num(m.score, 2) : "–")],
                 ["utility", d && d.utility ? MS.signed(d.utility.u, 3) : (m.pool_utility ? MS.signed(m.pool_utility.mean, 3) : "–")],
                 ["seed", seed ? "yes" : "no"]];
    if (m.forgotten) facts.push(["in the pool", "no longer: " + m.forgotten]);
    if (m.retired_step !== undefined) facts.push(["retired", "at step " + m.retired_step + " (measured utility below memory.retire_below; no longer retrieved)"]);
    var text = MS.textOf(run, id);
    return h("div", {class: "memory" + (highlight ? " highlight" : "") + (seed ? " seed" : "") + (m.forgotten ? " forgotten" : ""),
                     "data-memory": id},
      h("div", {class: "facts"}, MS.link("memory " + id, MS.route("run", runIndex, "m", id), {class: "memory-link"}),
        facts.map(function (f) { return h("span", {class: "fact"}, h("b", {}, f[0] + ": "), String(f[1])); })),
      text ? h("details", {open: open ? "open" : null}, h("summary", {}, MS.excerpt(text.question, 160)),
               h("div", {class: "qa"}, h("h4", {}, "question"), MS.pre(text.question), h("h4", {}, "answer"), MS.pre(text.answer)))
           : MS.note("no text: not recorded in the run's folder and not rebuilt (" + (run.memory_missing.join("; ") || "unknown id") + ")"));
  };

  function valuesTable(run, row) {
    var keys = Object.keys(row.m), paired = !!run.baseline;
    keys.sort(function (a, b) { return (run.measured.indexOf(a) < 0) - (run.measured.indexOf(b) < 0); });
    return [h("div", {class: "scroll"}, MS.table(["value", "this run"].concat(paired ? ["k = 0", "gain (higher: better)"] : []),
      keys.map(function (k) {
        return h("tr", {"data-metric": k}, h("td", {}, MS.metricLabel(k)), h("td", {class: "num"}, MS.num(row.m[k], 4)),
                 paired ? [h("td", {class: "num"}, MS.num(MS.baseValue(run, k, row.t), 4)),
                           h("td", {class: "num"}, MS.signed(MS.gain(run, k, row), 4))] : null);
      }), {class: "values"})),
      paired ? MS.note("k = 0: the same question in " + run.baseline.run + ".")
             : run.fields.k === 0 ? null : MS.note("No k = 0 run among those given pairs with this run: no gain is shown.")];
  }

  // One question of one run at one fill; used alone and in the side-by-side view of a claim.
  MS.questionView = function (run, runIndex, f, t) {
    MS.prepare(run);
    var row = run._row[f] && run._row[f][t];
    if (!row) return MS.note("This run has no row for that question at " + f + "% fill.");
    var test = run.tests[t], prompt = MS.prompt(run, row);
    var answer = row.a !== undefined ? MS.pre(row.a, {class: "text answer"})
      : MS.note("No answer was generated: what this run measured (" + run.measured.join(", ") + ") scores the reference " +
                "without decoding an answer.");
    return h("div", {class: "question"},
      h("p", {}, h("b", {}, test[0] + " · " + test[1]), " at " + f + "% fill in ", MS.link(run.label, MS.route("run", runIndex), {title: run.name})),
      h("h3", {}, "Question"), MS.pre(MS.questionOf(run, row)),
      h("h3", {}, "Values"), valuesTable(run, row),
      h("h3", {}, "Retrieved memories (" + row.r.length + ")"),
      row.r.length ? row.r.map(function (id) { return MS.memoryCard(run, runIndex, id); }) : MS.note("none (k = 0)"),
      h("h3", {}, "Prompt"),
      prompt.messages ? prompt.messages.map(function (m) { return h("div", {class: "message"}, h("h4", {}, m.role), MS.pre(m.content, {class: "text prompt"})); })
                      : MS.note(prompt.why),
      h("div", {class: "pair"}, h("div", {}, h("h3", {}, "Answer"), answer),
        h("div", {}, h("h3", {}, "Reference"), MS.pre(MS.referenceOf(run, row), {class: "text reference"}))));
  };

  function runHeader(run, i, active) {
    var f = run.fields, tabs = [["questions", MS.route("run", i)], ["memories (" + Object.keys(run.memories).length + ")", MS.route("run", i, "memories")],
                                ["gate decisions (" + run.decisions.length + ")", MS.route("run", i, "decisions")]];
    return h("div", {},
      h("h1", {}, run.label),
      MS.note((f.seed === undefined ? "" : "Seed " + f.seed + "; ") + "fills " + run.fills.join(", ") + "%."),
      h("p", {class: "note folder"}, "Folder: " + run.name),
      h("p", {class: "note rule"}, "Access: " + run.access + ". Poisoner: " + run.poison + "."),
      MS.note("Memory texts: " + run.memory_source + "."), run.memory_missing.map(function (m) { return h("p", {class: "note missing"}, "Missing: " + m); }),
      run.prompt ? null : h("p", {class: "note missing"}, "Prompts: " + run.prompt_missing),
      h("nav", {class: "tabs"}, tabs.map(function (t) { return MS.link(t[0], t[1], {class: active && t[0].indexOf(active) === 0 ? "active" : ""}); })));
  }
  MS.runHeader = runHeader;

  function questionsPage(parts, query) {
    var i = parts[1];
    return MS.run(i).then(function (run) {
      MS.prepare(run);
      var head = runHeader(run, i, "questions");
      if (run.no_predictions) return h("div", {}, head, MS.note(run.no_predictions));
      var fills = Object.keys(run.rows), fill = fills.indexOf(query.fill) >= 0 ? query.fill : fills[fills.length - 1];
      var agents = Array.from(new Set(run.tests.map(function (t) { return t[0]; })));
      var main = run.measured[0], list = h("tbody", {}), count = h("p", {class: "note count"});
      var fillSel = h("select", {id: "fill"}, fills.map(function (f) { return h("option", {value: f, selected: f === fill ? "selected" : null}, f + "% fill"); }));
      var agentSel = h("select", {id: "agent"}, h("option", {value: ""}, "all agents"),
        agents.map(function (a) { return h("option", {value: a, selected: a === query.agent ? "selected" : null}, a); }));
      var search = h("input", {id: "search", type: "search", placeholder: "search question, reference, answer or id", value: query.q || ""});
      function draw() {
        var f = fillSel.value, agent = agentSel.value, needle = search.value.toLowerCase();
        MS.setQuery({fill: f, agent: agent, q: search.value});
        var rows = run.rows[f].filter(function (r) {
          var t = run.tests[r.t];
          if (agent && t[0] !== agent) return false;
          if (!needle) return true;
          return [t[1], MS.questionOf(run, r), MS.referenceOf(run, r), r.a || ""].some(function (s) { return s.toLowerCase().indexOf(needle) >= 0; });
        });
        list.textContent = "";
        rows.forEach(function (r) {
          var t = run.tests[r.t];
          list.appendChild(h("tr", {"data-agent": t[0]}, h("td", {}, MS.link(t[1], MS.route("run", i, "q", f, r.t), {class: "question-link"})),
            h("td", {}, t[0]), h("td", {}, MS.excerpt(MS.questionOf(run, r), 110)),
            run.measured.map(function (k) { return h("td", {class: "num"}, MS.num(r.m[k], 3)); }),
            run.baseline ? h("td", {class: "num"}, MS.signed(MS.gain(run, main, r), 3)) : null));
        });
        count.textContent = rows.length + " of " + run.rows[f].length + " test questions shown";
      }
      [fillSel, agentSel].forEach(function (el) { el.addEventListener("change", draw); });
      search.addEventListener("input", draw);
      draw();
      return h("div", {}, head, h("div", {class: "controls"}, fillSel, agentSel, search), count,
        h("div", {class: "scroll"}, h("table", {class: "questions"}, h("thead", {}, h("tr", {}, h("th", {}, "test id"), h("th", {}, "agent"),
          h("th", {}, "question"), run.measured.map(function (k) { return h("th", {}, MS.metricLabel(k)); }),
          run.baseline ? h("th", {}, "gain vs k = 0 (" + MS.metricLabel(main) + ")") : null)), list)));
    });
  }

  function questionPage(parts) {
    var i = parts[1], f = parts[3], t = Number(parts[4]);
    return Promise.all([MS.run(i)]).then(function (got) {
      var run = MS.prepare(got[0]), site = MS.data.site, test = run.tests[t];
      var others = Object.keys(run.rows).filter(function (x) { return x !== f && run._row[x][t]; });
      var claims = [];
      site.claims.forEach(function (c, ci) {
        [["a", c.a], ["b", c.b]].forEach(function (side) {
          if (String(side[1].run) !== String(i) || String(side[1].fill) !== f) return;
          var k = c.pairs.findIndex(function (p) { return p[0] === test[0] && p[1] === test[1]; });
          if (k >= 0) claims.push(MS.link("(" + c.claim + ") " + c.label + ", " + MS.metricLabel(c.metric), MS.route("claim", ci, k), {class: "pair-link"}));
        });
      });
      return h("div", {}, runHeader(run, i, ""),
        h("p", {class: "related"}, others.length ? ["Same question at ", others.map(function (x) { return MS.link(x + "% fill ", MS.route("run", i, "q", x, t)); })] : null,
          claims.length ? [" Side by side in a claim: ", claims.map(function (c) { return [c, " "]; })] : null),
        MS.questionView(run, i, f, t));
    });
  }

  MS.routes.push({name: "questions", match: function (p) { return p[0] === "run" && p.length === 2; }, show: questionsPage});
  MS.routes.push({name: "question", match: function (p) { return p[0] === "run" && p[2] === "q" && p.length === 5; }, show: questionPage});
})();
