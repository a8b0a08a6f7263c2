// qrelkit's pages that refresh by themselves (a static file: the CSP forbids inline script).
// A topic page with nothing to judge (#waiting) polls /api/topics/<qid>/state and reloads when
// its state or what it waits for changes (a batch to judge, the runner back after a failure, the
// topic decided); while a round is computed it moves the progress estimate on. The organizer page
// polls /api/organizer/live and, when something changed, fetches the page again and swaps its
// main part in. Without this script the pages still work (reload them).
(function () {
  "use strict";
  function getJSON(url) {
    return fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); });
  }
  function showEstimate(w) {
    var p = document.getElementById("estimate"), bar = document.getElementById("estimate-bar");
    if (!p || !w || w.elapsed_s === null || w.elapsed_s === undefined) { return; }
    if (w.estimate_s) {
      p.textContent = "A round takes about " + w.estimate_s.toFixed(1) + " s; " + w.elapsed_s.toFixed(1) + " s so far.";
      if (bar) { bar.value = Math.min(w.elapsed_s / w.estimate_s, 1); }
    } else {
      p.textContent = "The first round takes longest: " + w.elapsed_s.toFixed(1) + " s so far.";
    }
  }
  var topic = document.getElementById("topic"), waiting = document.getElementById("waiting");
  if (topic && waiting) {
    var state = topic.getAttribute("data-state"), seen = null;
    var url = "/api/topics/" + encodeURIComponent(topic.getAttribute("data-qid")) + "/state";
    // the next batch is usually there within a second: look often while it is computed (the
    // poll is one cheap read), seldom while others judge or the campaign is paused
    var every = { computing: 200, waiting: 1500, paused: 3000 }[state] || 1500;
    var poll = function () {
      getJSON(url).then(function (s) {
        var w = s.waiting || {};
        var what = state === "computing" ? w.reason : JSON.stringify(w);  // the estimate moves: not a change
        if (seen === null && s.state === state) { seen = what; }
        if (s.state !== state || what !== seen) { window.location.reload(); return; }
        if (state === "computing") { showEstimate(w); }
        setTimeout(poll, every);
      }).catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, every);
  }
  var live = document.getElementById("organizer-live");
  if (live) {
    var swap = function () {
      return fetch("/organizer", { headers: { "Accept": "text/html" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
          var main = document.querySelector("main");
          if (fresh && main) { main.replaceWith(fresh); live = document.getElementById("organizer-live"); }
        });
    };
    var tick = function () {
      getJSON("/api/organizer/live").then(function (s) {
        if (live && s.stamp !== live.getAttribute("data-stamp")) { return swap(); }
      }).then(function () { setTimeout(tick, 4000); }, function () { setTimeout(tick, 10000); });
    };
    setTimeout(tick, 4000);
  }
})();
