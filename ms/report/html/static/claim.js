// A claim's comparison: the per-question differences its mean averages, and one question of the two
// runs side by side (for example k = 0 and k = 3).
"use strict";

(function () {
  var h = MS.h;

  // a − b as the claim counts it: b − a where lower is better, so above 0 always says a is better.
  function diff(c, p) { return c.higher_is_better ? p[2] - p[3] : p[3] - p[2]; }

  // A side in words (its condition, at its fill); its run folders are the link's title.
  function sideName(side) { return side.words + " at " + side.fill + "% fill"; }

  function header(c) {
    return h("div", {},
      h("h1", {}, "(" + c.claim + ") " + c.text),
      h("p", {}, c.label + " · " + c.setting + "; " + MS.metricLabel(c.metric) + ": a − b = " + MS.ci(c.estimate, c.lo, c.hi, 4) +
        ", p = " + (c.p === null ? "–" : c.p.toPrecision(3)) + ", n = " + c.n + ", agents ahead " + c.wins + "/" + c.agents + ": ",
        h("span", {class: "verdict " + c.verdict}, c.verdict)),
      h("p", {class: "sides-named"}, "a: ", MS.link(sideName(c.a), MS.route("run", c.a.run), {title: c.a.runs.join(" + ")}),
        "; b: ", MS.link(sideName(c.b), MS.route("run", c.b.run), {title: c.b.runs.join(" + ")})),
      c.replicates > 1 ? MS.note("The claim averages each question over seed replicates; the side-by-side view shows the first run of each side.") : null,
      c.higher_is_better ? null : MS.note(MS.metricLabel(c.metric) + " is better lower: each difference is b − a."));
  }

  function claimPage(parts, query) {
    var c = MS.data.site.claims[Number(parts[1])];
    if (!c) return MS.notFound.show();
    var agents = Array.from(new Set(c.pairs.map(function (p) { return p[0]; })));
    var agentSel = h("select", {id: "agent"}, h("option", {value: ""}, "all agents"),
      agents.map(function (a) { return h("option", {value: a, selected: a === query.agent ? "selected" : null}, a); }));
    var search = h("input", {id: "search", type: "search", placeholder: "search test ids", value: query.q || ""});
    var list = h("tbody", {}), count = h("p", {class: "note count"});
    var order = c.pairs.map(function (p, k) { return k; }).sort(function (x, y) { return diff(c, c.pairs[y]) - diff(c, c.pairs[x]); });
    function draw() {
      MS.setQuery({agent: agentSel.value, q: search.value});
      var needle = search.value.toLowerCase(), shown = order.filter(function (k) {
        var p = c.pairs[k];
        return (!agentSel.value || p[0] === agentSel.value) && (!needle || p[1].toLowerCase().indexOf(needle) >= 0);
      });
      list.textContent = "";
      shown.forEach(function (k) {
        var p = c.pairs[k];
        list.appendChild(h("tr", {}, h("td", {}, MS.link(p[1], MS.route("claim", parts[1], k), {class: "pair-link"})), h("td", {}, p[0]),
          h("td", {class: "num"}, MS.num(p[2], 4)), h("td", {class: "num"}, MS.num(p[3], 4)), h("td", {class: "num"}, MS.signed(diff(c, p), 4))));
      });
      var ds = shown.map(function (k) { return diff(c, c.pairs[k]); });
      count.textContent = shown.length + " of " + c.pairs.length + " pairs shown, largest a − b first; their mean difference " +
        MS.signed(MS.mean(ds), 4);
    }
    agentSel.addEventListener("change", draw);
    search.addEventListener("input", draw);
    draw();
    return h("div", {}, header(c), h("div", {class: "controls"}, agentSel, search), count,
      h("div", {class: "scroll"}, MS.table(["test question", "agent", "a", "b", "a − b"], [list], {class: "pairs"})));
  }

  function pairPage(parts) {
    var c = MS.data.site.claims[Number(parts[1])], p = c && c.pairs[Number(parts[2])];
    if (!p) return MS.notFound.show();
    return Promise.all([MS.run(c.a.run), MS.run(c.b.run)]).then(function (got) {
      function view(run, side) {
        MS.prepare(run);
        var t = run.tests.findIndex(function (x) { return x[0] === p[0] && x[1] === p[1]; });
        return h("div", {class: "side"}, h("h2", {}, (side === c.a ? "a: " : "b: ") + sideName(side)),
          t < 0 ? MS.note("This run has no such question.") : MS.questionView(run, side.run, String(side.fill), t));
      }
      var k = Number(parts[2]);
      return h("div", {}, header(c),
        h("p", {class: "related"}, MS.link("all pairs of this comparison", MS.route("claim", parts[1])),
          k > 0 ? [" · ", MS.link("previous", MS.route("claim", parts[1], k - 1))] : null,
          k + 1 < c.pairs.length ? [" · ", MS.link("next", MS.route("claim", parts[1], k + 1))] : null),
        h("h2", {}, p[0] + " · " + p[1] + ": a " + MS.num(p[2], 4) + ", b " + MS.num(p[3], 4) + ", a − b " + MS.signed(diff(c, p), 4)),
        h("div", {class: "sides"}, view(got[0], c.a), view(got[1], c.b)));
    });
  }

  MS.routes.push({name: "claim", match: function (p) { return p[0] === "claim" && p.length === 2; }, show: claimPage});
  MS.routes.push({name: "pair", match: function (p) { return p[0] === "claim" && p.length === 3; }, show: pairPage});
})();
