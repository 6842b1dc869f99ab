// The front page: the claims, Tables 1-2, the figures, the sharing matrices and the runs.
"use strict";

(function () {
  var h = MS.h;

  function claimsSection(site) {
    var rows = site.claims.map(function (c, i) {
      var verdict = h("span", {class: "verdict " + c.verdict}, c.verdict);
      return h("tr", {},
        h("td", {}, "(" + c.claim + ")"), h("td", {}, c.label), h("td", {}, c.setting), h("td", {}, MS.metricLabel(c.metric)),
        h("td", {class: "num"}, MS.ci(c.estimate, c.lo, c.hi)), h("td", {class: "num"}, c.p === null ? "–" : c.p.toPrecision(3)),
        h("td", {class: "num"}, c.n), h("td", {class: "num"}, c.wins + "/" + c.agents), h("td", {}, verdict),
        h("td", {}, MS.link("per question", MS.route("claim", i), {class: "claim-link"})));
    });
    return h("section", {id: "claims"}, h("h2", {}, "Claims"),
      MS.note("Each row: the mean paired difference a − b over the test questions both runs measured (a better " +
              "where above 0), its 95% bootstrap CI, a sign-flip permutation p and the verdict at alpha = 0.05. " +
              "'per question' lists the pairs the mean is taken over, and shows each question's two runs side by side."),
      site.claims.length ? [MS.table(["claim", "comparison", "setting", "metric", "a − b [95% CI]", "p", "n",
                                      "agents ahead", "verdict", ""], rows, {class: "claims"}),
                            h("p", {class: "note records"}, site.claim_records)]
                         : MS.note("No claim could be tested on these runs."),
      site.untested.length ? h("ul", {class: "untested"}, site.untested.map(function (t) { return h("li", {}, "not tested here: " + t); })) : null,
      h("details", {}, h("summary", {}, "How each claim is tested"),
        h("ul", {}, Object.keys(site.claim_rules).map(function (id) {
          var r = site.claim_rules[id];
          return h("li", {}, "(" + id + ") " + r.text + ": " + r.how);
        }))));
  }

  function tablesSection(site) {
    return h("section", {id: "tables"}, site.tables.map(function (t) {
      return h("div", {class: "scroll"}, h("h2", {}, t.title),
        MS.table(t.header, t.rows.map(function (r) { return h("tr", {}, r.map(function (c) { return h("td", {}, c); })); })),
        t.notes.map(function (n) { return MS.note(n); }));
    }));
  }

  function figuresSection(site) {
    if (!site.figures.length) return null;
    return h("section", {id: "figures"}, h("h2", {}, "Figures"), site.figures.map(function (f) {
      return h("figure", {}, h("img", {src: "figures/" + encodeURIComponent(f.file), alt: f.title, loading: "lazy"}),
               h("figcaption", {}, f.title));
    }));
  }

  // One run's matrix: rows are the retrieving agents, columns the writers; each cell links to its retrievals.
  MS.sharingTable = function (runIndex, s) {
    var blocks = [], columns = s.columns;
    columns.forEach(function (c) {
      var block = c === s.everyone ? "" : c.split("=")[0];
      if (!blocks.length || blocks[blocks.length - 1].name !== block) blocks.push({name: block, n: 0});
      blocks[blocks.length - 1].n += 1;
    });
    var top = h("tr", {}, h("th", {}, ""), blocks.map(function (b) { return h("th", {colspan: b.n, class: "block"}, b.name || "all"); }));
    var names = h("tr", {}, h("th", {}, "retrieving agent"), columns.map(function (c) {
      return h("th", {}, c === s.everyone ? "all" : c.slice(c.indexOf("=") + 1));
    }));
    var body = s.rows.map(function (row) {
      var counts = (s.counts || {})[row] || {}, gains = (s.gains || {})[row] || {};
      var label = row === s.everyone ? "all" : row + (s.backbone_of && s.backbone_of[row] ? " (" + s.backbone_of[row] + ")" : "");
      return h("tr", {class: row === s.everyone ? "total" : ""}, h("th", {}, label), columns.map(function (c) {
        var n = counts[c];
        if (!n) return h("td", {class: "empty"}, "·");
        var g = gains[c] || [];
        return h("td", {class: "cell"}, MS.link(String(n), MS.route("run", runIndex, "cell", row, c),
                                                {class: "cell-link", title: "the " + n + " retrievals behind this cell"}),
                 s.baseline ? h("div", {class: "gain"}, MS.ci(g[0], g[1], g[2], 3)) : null);
      }));
    });
    return h("div", {class: "scroll"}, h("table", {class: "sharing"}, h("thead", {}, top, names), h("tbody", {}, body)));
  };

  function sharingSection(site) {
    var drawn = Object.keys(site.sharing || {}).filter(function (i) { return !site.sharing[i].missing; });
    var missing = Object.keys(site.sharing || {}).filter(function (i) { return site.sharing[i].missing; });
    return h("section", {id: "sharing"}, h("h2", {}, "Who helped whom"),
      MS.note("Per run: whose memories each agent retrieved (count; each test question adds k), and below each count " +
              "the mean gain of those retrievals against the same question at k = 0 with its 95% CI. Click a count " +
              "to see the retrievals behind it."),
      drawn.map(function (i) {
        var s = site.sharing[i], run = site.runs[i];
        return h("div", {class: "matrix"}, h("h3", {}, MS.link(run.label, MS.route("run", i), {title: run.name})),
          MS.note(run.backbone + ", k = " + run.k + ", " + run.pool + " pool, fill " + s.fill + "%; gain in " +
                  MS.metricLabel(s.metric) + (s.baseline ? " against k = 0 in " + s.baseline + " (" + s.paired + " questions paired)"
                                                         : ": none, no k = 0 run of the same backbone, data and prompt")),
          MS.sharingTable(i, s), (s.notes || []).map(function (n) { return h("p", {class: "note sharing-note"}, n); }));
      }),
      missing.length ? h("ul", {}, missing.map(function (i) {
        return h("li", {}, site.runs[i].label + ": no matrix, " + site.sharing[i].missing);
      })) : null);
  }

  function runsSection(site) {
    var rows = site.runs.map(function (r, i) {
      // The run is named by its condition in words; its folder's name, which may be hundreds of characters
      // without a space, is the link's title rather than a column that would squeeze the others.
      return h("tr", {}, h("td", {class: "condition"}, MS.link(r.label, MS.route("run", i), {class: "run-link", title: r.name})),
        h("td", {}, r.seed === null ? "–" : r.seed), h("td", {}, r.fills.join(", ")), h("td", {class: "num"}, r.overall), h("td", {}, r.use));
    });
    return h("section", {id: "runs"}, h("h2", {}, "Runs (" + site.runs.length + " complete, " + site.skipped.length + " skipped)"),
      MS.note(site.selection_rule),
      h("div", {class: "scroll"}, MS.table(["run (its folder: hover)", "seed", "fills (%)",
                                            "overall " + MS.metricLabel(site.metric) + " [95% CI]", "in the tables?"], rows)),
      h("p", {class: "note records"}, site.run_records),
      site.skipped.length ? h("ul", {}, site.skipped.map(function (s) { return h("li", {}, "skipped " + s.path + ": " + s.reason); })) : null);
  }

  MS.routes.push({name: "front", match: function (p) { return p.length === 0; }, show: function () {
    var site = MS.data.site;
    return h("div", {},
      h("h1", {}, "ms report: " + site.roots.join(", ")),
      MS.note("Metric: " + MS.metricLabel(site.metric) + ". Published numbers: " + site.paper + ". Every number of ours " +
              "is a mean over test questions with its 95% bootstrap CI."),
      h("nav", {class: "toc"}, ["claims", "tables", "figures", "sharing", "runs"].map(function (id) {
        return h("a", {href: "#/", "data-target": id, onclick: function (e) {
          e.preventDefault(); var el = document.getElementById(id); if (el) el.scrollIntoView();
        }}, id);
      })),
      claimsSection(site), runsSection(site), sharingSection(site), tablesSection(site), figuresSection(site));
  }});
})();
