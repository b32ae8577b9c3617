// The one script of every gallery page (benchmark/report/gallery.py). The page's data
// scripts set window.XCM_TRIPLETS / XCM_MODELS / XCM_XM3600; window.XCM_PAGE says which kind
// of page it is. Text is set with textContent only, inside <bdi> (its direction stays its
// own); the state (filters, page, the two models) is the URL's # part.
(function () {
  "use strict";
  var P = window.XCM_PAGE, app = document.getElementById("app");
  var ROLES = ["semantic", "cultural", "non_relevant"];
  var LABELS = ["semantic", "cultural", "non-relevant"];

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function bdi(text, cls) { return el("bdi", {cls: cls || "", text: text}); }
  function fmt(x) { return (x === null || x === undefined) ? "-" : x.toFixed(4); }
  function state() {
    var s = {}, h = new URLSearchParams(location.hash.slice(1));
    h.forEach(function (v, k) { s[k] = v; });
    s.page = Math.max(1, parseInt(s.page || "1", 10) || 1);
    return s;
  }
  function go(s) {
    var h = new URLSearchParams();
    Object.keys(s).forEach(function (k) { if (s[k] !== "" && s[k] !== undefined) h.set(k, s[k]); });
    location.hash = h.toString();
  }
  function select(name, label, options, value, s) {
    var sel = el("select", {name: name, id: "f-" + name});
    options.forEach(function (o) {
      var opt = el("option", {value: o[0], text: o[1]});
      if (o[0] === value) opt.selected = true;
      sel.appendChild(opt);
    });
    sel.addEventListener("change", function () {
      var n = Object.assign({}, s); n[name] = sel.value; n.page = 1; go(n);
    });
    return el("label", {text: label + " "}, [sel]);
  }
  function pager(s, pages) {
    function btn(label, page, id) {
      var b = el("button", {type: "button", id: id, text: label});
      if (page < 1 || page > pages) b.disabled = true;
      b.addEventListener("click", function () { var n = Object.assign({}, s); n.page = page; go(n); });
      return b;
    }
    return el("span", {cls: "pager"}, [btn("\u2190 previous", s.page - 1, "prev"),
      el("span", {id: "page-of", text: "page " + Math.min(s.page, Math.max(pages, 1)) + " of " + Math.max(pages, 1)}),
      btn("next \u2192", s.page + 1, "next")]);
  }
  function pageOf(items, s) {
    var size = P.pageSize, pages = Math.ceil(items.length / size);
    var p = Math.min(s.page, Math.max(pages, 1));
    return {pages: pages, rows: items.slice((p - 1) * size, p * size)};
  }
  function image(T, idx, alt) {
    var t = idx === null || idx === undefined ? null : T.thumbs[idx];
    if (!t) return el("div", {cls: "noimg", text: "no image"});
    return el("img", {src: P.thumbRoot + t, alt: alt, loading: "lazy", title: T.images[idx]});
  }
  function header(T, i) {
    var h = el("header");
    h.appendChild(bdi(T.texts[T.text[i]], "term"));
    h.appendChild(el("span", {cls: "eng"}, [document.createTextNode(" ("),
      bdi(T.english[i]), document.createTextNode(")")]));
    h.appendChild(el("div", {cls: "meta"}, [bdi(T.countries[T.country[i]]),
      document.createTextNode(" \u00b7 "), bdi(T.concepts[T.concept[i]]),
      document.createTextNode(" \u00b7 triplet "), bdi(T.ids[i])]));
    if (P.task === "3xcm-i2i") h.appendChild(el("figure", {cls: "query"},
      [image(T, T.query_image[i], "query image"), el("figcaption", {text: "query image"})]));
    return h;
  }
  function margin(sims) { return sims[0] - Math.max(sims[1], sims[2]); }
  function groupHeads(T, rows, list, card) {
    var last = null, grid = null;
    rows.forEach(function (i) {
      var g = T.countries[T.country[i]] + " \u00b7 " + T.concepts[T.concept[i]];
      if (g !== last) {
        list.appendChild(el("h3", {cls: "group"}, [bdi(T.countries[T.country[i]]),
          document.createTextNode(" \u00b7 "), bdi(T.concepts[T.concept[i]])]));
        grid = el("div", {cls: "cards"}); list.appendChild(grid); last = g;
      }
      grid.appendChild(card(i));
    });
  }
  function filterOptions(T, items) {
    var cs = {}, ks = {};
    items.forEach(function (i) { cs[T.country[i]] = 1; ks[T.concept[i]] = 1; });
    var countries = Object.keys(cs).map(Number).sort(function (a, b) { return a - b; });
    var concepts = Object.keys(ks).map(Number).sort(function (a, b) { return a - b; });
    return {countries: [["", "all"]].concat(countries.map(function (c) { return [T.countries[c], T.countries[c]]; })),
            concepts: [["", "all"]].concat(concepts.map(function (c) { return [T.concepts[c], T.concepts[c]]; }))};
  }
  function keep(T, i, s) {
    return (!s.country || T.countries[T.country[i]] === s.country) &&
      (!s.concept || T.concepts[T.concept[i]] === s.concept);
  }
  function render(controls, summary, list) {
    app.textContent = "";
    app.appendChild(controls); app.appendChild(summary); app.appendChild(list);
  }

  function wrongPage() {
    var T = window.XCM_TRIPLETS, M = window.XCM_MODELS[P.model], s = state();
    var wrong = [];
    for (var i = 0; i < T.ids.length; i++) if (M.winner[i] !== 0) wrong.push(i);
    var items = wrong.filter(function (i) {
      return keep(T, i, s) && (!s.outcome || ROLES[M.winner[i]] === s.outcome);
    });
    var pg = pageOf(items, s), o = filterOptions(T, wrong);
    var controls = el("div", {cls: "controls"}, [
      select("country", "country", o.countries, s.country || "", s),
      select("concept", "concept", o.concepts, s.concept || "", s),
      select("outcome", "chosen", [["", "cultural or non-relevant"], ["cultural", "cultural"],
        ["non_relevant", "non-relevant"]], s.outcome || "", s),
      pager(s, pg.pages)]);
    var summary = el("p", {cls: "summary", id: "summary",
      text: items.length + " of " + wrong.length + " wrong triplets (of " + T.ids.length +
        "); margin = sim(semantic) - max(sim(cultural), sim(non-relevant))"});
    var list = el("div", {id: "items"});
    groupHeads(T, pg.rows, list, function (i) {
      var sims = M.sims[i], cands = T.candidates[i];
      var figs = ROLES.map(function (r, j) {
        var chosen = M.winner[i] === j;
        var cap = el("figcaption", {}, [el("span", {text: LABELS[j] + " "}),
          el("b", {cls: "sim", text: fmt(sims[j])})]);
        if (chosen) cap.appendChild(el("span", {cls: "badge", text: "chosen"}));
        return el("figure", {cls: r + (chosen ? " chosen" : ""), "data-role": r,
          "data-sim": String(sims[j])}, [image(T, cands[j], LABELS[j] + " image"), cap]);
      });
      var m = margin(sims);
      return el("article", {cls: "card", "data-triplet-id": T.ids[i], "data-outcome": ROLES[M.winner[i]]},
        [header(T, i), el("div", {cls: "cands"}, figs),
         el("p", {cls: "margin", "data-margin": String(m), text: "margin " + fmt(m)})]);
    });
    if (!pg.rows.length) list.appendChild(el("p", {cls: "empty", text: "No triplets match."}));
    render(controls, summary, list);
  }

  var loading = {};
  function need(name) {
    if (window.XCM_MODELS && window.XCM_MODELS[name]) return true;
    if (!loading[name]) {
      loading[name] = 1;
      var sc = el("script", {src: P.models[name]});
      sc.addEventListener("load", route);
      document.body.appendChild(sc);
    }
    return false;
  }
  function direction(a, b) {
    if (a === b) return null;
    if (a === 0) return "a";
    if (b === 0) return "b";
    return "both";
  }
  function comparePage() {
    var T = window.XCM_TRIPLETS, names = Object.keys(P.models), s = state();
    var A = s.a || names[0], B = s.b || names[1];
    if (!P.models[A]) A = names[0];
    if (!P.models[B]) B = names[1];
    var ok = need(A) & need(B);
    var opts = names.map(function (n) { return [n, n]; });
    var head = [select("a", "model A", opts, A, Object.assign({}, s, {a: A, b: B})),
                select("b", "model B", opts, B, Object.assign({}, s, {a: A, b: B}))];
    if (!ok) { render(el("div", {cls: "controls"}, head), el("p", {text: "loading..."}), el("div")); return; }
    var MA = window.XCM_MODELS[A], MB = window.XCM_MODELS[B];
    var dis = [], counts = {a: 0, b: 0, both: 0};
    for (var i = 0; i < T.ids.length; i++) {
      var d = direction(MA.winner[i], MB.winner[i]);
      if (d) { dis.push(i); counts[d]++; }
    }
    var items = dis.filter(function (i) {
      return keep(T, i, s) && (!s.direction || direction(MA.winner[i], MB.winner[i]) === s.direction);
    });
    var st = Object.assign({}, s, {a: A, b: B}), pg = pageOf(items, st), o = filterOptions(T, dis);
    var controls = el("div", {cls: "controls"}, head.concat([
      select("direction", "where", [["", "any disagreement"], ["a", "A right, B wrong"],
        ["b", "B right, A wrong"], ["both", "both wrong, differently"]], s.direction || "", st),
      select("country", "country", o.countries, s.country || "", st),
      select("concept", "concept", o.concepts, s.concept || "", st), pager(st, pg.pages)]));
    var summary = el("p", {cls: "summary", id: "summary", text: items.length + " of " + dis.length +
      " triplets where A and B choose differently (of " + T.ids.length + "): A right, B wrong " +
      counts.a + "; B right, A wrong " + counts.b + "; both wrong, differently " + counts.both});
    var list = el("div", {id: "items"});
    groupHeads(T, pg.rows, list, function (i) {
      var cands = T.candidates[i];
      var figs = ROLES.map(function (r, j) {
        var ca = MA.winner[i] === j, cb = MB.winner[i] === j;
        var cap = el("figcaption", {}, [el("span", {text: LABELS[j] + " "}),
          el("span", {cls: "sim-a", text: "A " + fmt(MA.sims[i][j])}), el("span", {text: " \u00b7 "}),
          el("span", {cls: "sim-b", text: "B " + fmt(MB.sims[i][j])})]);
        if (ca) cap.appendChild(el("span", {cls: "badge a", text: "A"}));
        if (cb) cap.appendChild(el("span", {cls: "badge b", text: "B"}));
        return el("figure", {cls: r + (ca ? " chosen-a" : "") + (cb ? " chosen-b" : ""), "data-role": r},
          [image(T, cands[j], LABELS[j] + " image"), cap]);
      });
      return el("article", {cls: "card", "data-triplet-id": T.ids[i],
        "data-direction": direction(MA.winner[i], MB.winner[i])},
        [header(T, i), el("div", {cls: "cands"}, figs),
         el("p", {cls: "margin", text: "margin A " + fmt(margin(MA.sims[i])) + " \u00b7 B " + fmt(margin(MB.sims[i]))})]);
    });
    if (!pg.rows.length) list.appendChild(el("p", {cls: "empty", text: "No triplets match."}));
    render(controls, summary, list);
  }

  function xm3600Page() {
    var D = window.XCM_XM3600, s = state(), locs = {};
    var all = D.ids.map(function (_, i) { locs[D.locale[i]] = 1; return i; });
    function found(i) { return D.relevant[i].indexOf(true) >= 0; }
    var items = all.filter(function (i) {
      return (!s.locale || D.locale[i] === s.locale) &&
        (!s.found || (s.found === "yes") === found(i));
    });
    var pg = pageOf(items, s);
    var controls = el("div", {cls: "controls"}, [
      select("locale", "image locale", [["", "all"]].concat(Object.keys(locs).sort().map(function (l) { return [l, l]; })), s.locale || "", s),
      select("found", "own caption among these", [["", "any"], ["yes", "yes"], ["no", "no"]], s.found || "", s),
      pager(s, pg.pages)]);
    var summary = el("p", {cls: "summary", id: "summary", text: items.length + " of " + D.ids.length +
      " query images; top " + (D.captions[0] || []).length + " captions each, the image's own marked \u2713"});
    var list = el("div", {id: "items", cls: "cards"});
    pg.rows.forEach(function (i) {
      var tr1 = el("tr", {}, D.metrics.map(function (m) { return el("th", {text: m}); }));
      var tr2 = el("tr", {}, D.metrics.map(function (m, j) {
        return el("td", {"data-key": m, text: fmt(D.values[i][j])}); }));
      var ol = el("ol", {cls: "captions"}, D.captions[i].map(function (c, j) {
        var rel = D.relevant[i][j];
        return el("li", {cls: rel ? "relevant" : "", "data-language": D.languages[i][j]}, [
          bdi(D.languages[i][j], "lang"), bdi(c, "caption"),
          rel ? el("span", {text: " \u2713"}) : null]);
      }));
      list.appendChild(el("article", {cls: "card", "data-image-id": D.ids[i]}, [
        el("header", {}, [bdi(D.ids[i], "term"),
          el("span", {cls: "meta"}, [document.createTextNode(" locale "), bdi(D.locale[i])])]),
        el("table", {cls: "metrics"}, [tr1, tr2]), ol]));
    });
    if (!pg.rows.length) list.appendChild(el("p", {cls: "empty", text: "No images match."}));
    render(controls, summary, list);
  }

  function route() {
    if (P.kind === "wrong") wrongPage();
    else if (P.kind === "compare") comparePage();
    else if (P.kind === "xm3600") xm3600Page();
  }
  window.addEventListener("hashchange", route);
  route();
})();
