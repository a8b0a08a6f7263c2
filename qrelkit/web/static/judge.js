// qrelkit's pages (docs/web.md, "The assessor's view"). Every control is a plain form or link:
// without this script the pages still work. With it:
// * keys: an element with data-key="K" (or data-keys="K1 K2 ...") is pressed by those keys: 0-9 a
//   grade, s skip, r the review of one's judgments on a topic
//   (review.js has the review's own keys), b back from it, h highlighting, g the guidelines (and back), ? this page's keys (Esc
//   closes them); ArrowLeft, f, 1 (left), ArrowRight, j, 2 (right) and u undo on a preference task;
// * a judgment is sent to the JSON API and the next passage swapped in without a reload, with a
//   small "saved" notice (the form is posted as usual if the request cannot be made);
// * the query terms' highlighting is toggled (h) and the choice kept (localStorage);
// * while the next batch is computed or other assessors finish, /api/topics/<qid>/state is polled
//   and the page reloaded when its state changes.
// body[data-settled="1"] says the page is ready for the next key (the browser tests wait for it).
(function () {
  "use strict";
  var body = document.body;
  var HIGHLIGHT = "qrelkit-highlight";
  function settled(yes) { body.setAttribute("data-settled", yes ? "1" : "0"); }
  function keyed() {  // the elements keys press (those of a hidden part of the page are out)
    return Array.prototype.filter.call(document.querySelectorAll("[data-key], [data-keys]"),
                                       function (e) { return !e.closest("[hidden]"); });
  }
  function elementFor(key) {
    var all = keyed();
    for (var i = 0; i < all.length; i++) {
      var keys = (all[i].getAttribute("data-keys") || all[i].getAttribute("data-key")).split(" ");
      if (keys.indexOf(key) >= 0) { return all[i]; }
    }
    return null;
  }
  function submits(el) { return el.tagName === "BUTTON" && (el.getAttribute("type") || "submit") === "submit"; }
  function lock(on, except) {
    keyed().forEach(function (b) { if (b.tagName === "BUTTON" && submits(b) && b !== except) { b.disabled = on; } });
  }

  // -- the help overlay ---------------------------------------------------------------------------
  var help = document.getElementById("help");
  function showHelp(on) { if (help) { help.hidden = !on; if (on) { help.focus(); } } }
  var helpButton = document.getElementById("help-button");
  if (helpButton) { helpButton.addEventListener("click", function () { showHelp(help.hidden); }); }
  var helpClose = document.getElementById("help-close");
  if (helpClose) { helpClose.addEventListener("click", function () { showHelp(false); }); }

  // -- the saved notice ---------------------------------------------------------------------------
  var saved = document.getElementById("saved");
  var savedTimer = null;
  function notice(text, error) {
    if (!saved) { return; }
    saved.textContent = text;
    saved.className = error ? "saved error" : "saved";
    saved.hidden = false;
    clearTimeout(savedTimer);
    savedTimer = setTimeout(function () { saved.hidden = true; }, error ? 8000 : 1800);
  }

  // -- highlighting ---------------------------------------------------------------------------------
  var toggle = document.getElementById("highlight-toggle");
  function highlight(on) {
    body.classList.toggle("no-marks", !on);
    if (toggle) { toggle.setAttribute("aria-pressed", on ? "true" : "false"); }
    try { localStorage.setItem(HIGHLIGHT, on ? "on" : "off"); } catch (e) { /* private mode: not kept */ }
  }
  var stored = null;
  try { stored = localStorage.getItem(HIGHLIGHT); } catch (e) { stored = null; }
  highlight(stored !== "off");
  if (toggle) { toggle.addEventListener("click", function () { highlight(body.classList.contains("no-marks")); }); }

  // -- the guidelines: back where one came from ---------------------------------------------------
  var back = document.getElementById("guidelines-back");
  if (back) {
    back.addEventListener("click", function (ev) { if (history.length > 1) { ev.preventDefault(); history.back(); } });
  }

  // -- keys -----------------------------------------------------------------------------------------
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) { return; }
    var t = ev.target && ev.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") { return; }
    if (help && !help.hidden) {
      if (ev.key === "Escape" || ev.key === "?") { ev.preventDefault(); showHelp(false); }
      return;
    }
    var el = elementFor(ev.key);
    if (!el || el.disabled) { return; }
    ev.preventDefault();
    if (submits(el)) { settled(false); lock(true, el); }
    el.click();
  });

  // -- judging without a reload ---------------------------------------------------------------------
  var form = document.getElementById("judge-form");
  var item = document.getElementById("item");
  function setText(id, text) { var e = document.getElementById(id); if (e) { e.textContent = text; } }
  function passage(text, spans) {
    var box = document.getElementById("passage-text");
    box.textContent = "";
    if (text === null || text === undefined) {
      var i = document.createElement("i");
      i.textContent = "(this passage is not in the corpus)";
      box.appendChild(i);
      return;
    }
    var at = 0;
    (spans || []).forEach(function (s) {
      box.appendChild(document.createTextNode(text.slice(at, s[0])));
      var m = document.createElement("mark");
      m.textContent = text.slice(s[0], s[1]);
      box.appendChild(m);
      at = s[1];
    });
    box.appendChild(document.createTextNode(text.slice(at)));
    box.scrollTop = 0;
  }
  function swap(v) {
    var it = v.item;
    item.setAttribute("data-batch", it.batch_id);
    item.setAttribute("data-docid", it.docid);
    item.setAttribute("data-kind", it.kind);
    document.querySelectorAll("#judge-form input[name=batch_id], #skip-form input[name=batch_id]")
      .forEach(function (e) { e.value = it.batch_id; });
    document.querySelectorAll("#judge-form input[name=docid], #skip-form input[name=docid]")
      .forEach(function (e) { e.value = it.docid; });
    var p = document.getElementById("progress");
    p.setAttribute("data-judged", it.batch_judged);
    p.setAttribute("data-items", it.batch_items);
    p.setAttribute("data-owed", v.owed);
    setText("progress-batch", "batch " + it.batch_id + " (" + it.kind + "): ");
    setText("progress-text", it.batch_judged + " of " + it.batch_items + " judged in this batch · " + v.owed +
            " left for you on this topic");
    setText("passage-docid", it.docid);
    passage(it.text, it.highlights);
    var review = document.getElementById("review-form");
    if (review) { review.hidden = !v.reviewable; setText("review-count", v.reviewable); }
    if (v.mine) {
      setText("mine-today", v.mine.judged_today);
      setText("mine-left", v.mine.batch_left);
    }
  }
  function fallback(grade) {  // the plain form post, as without this script
    var g = document.createElement("input");
    g.type = "hidden"; g.name = "grade"; g.value = grade;
    form.appendChild(g);
    form.submit();
  }
  if (form && item && window.fetch && window.JSON) {
    var api = item.getAttribute("data-api");
    var csrf = form.querySelector("input[name=csrf]").value;
    var get = function () {
      return fetch(api, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error("status " + r.status); } return r.json(); });
    };
    var next = function () {  // the passage asked for now, swapped in; the page again when none is
      return get().then(function (v) {
        if (v.state === "judging" && v.item) { swap(v); lock(false); settled(true); }
        else { window.location.assign(window.location.pathname); }
      }, function () { window.location.assign(window.location.pathname); });
    };
    form.addEventListener("submit", function (ev) {
      var button = ev.submitter;
      if (!button || !button.value) { return; }
      ev.preventDefault();
      settled(false);
      lock(true, button);
      var grade = button.value;
      var name = button.textContent.replace(/\s+/g, " ").trim();
      var sent = { batch_id: form.querySelector("input[name=batch_id]").value,
                   docid: form.querySelector("input[name=docid]").value, grade: grade };
      fetch(api + "/judgments", { method: "POST", credentials: "same-origin",
                                  headers: { "Content-Type": "application/json", "Accept": "application/json",
                                             "X-CSRF-Token": csrf },
                                  body: JSON.stringify(sent) })
        .then(function (r) {
          return r.json().then(function (d) { return { ok: r.ok, status: r.status, d: d }; });
        }, function () { fallback(grade); throw null; })
        .then(function (res) {
          if (!res.ok) {
            notice("not saved: " + (res.d.error || "the server refused it"), true);
            // 409: another tab or the runner moved on: show what is asked now, not the stale passage
            if (res.status === 409) { return next(); }
            lock(false); settled(true);
            return null;
          }
          notice((res.d.status === "repeated" ? "already saved: " : "saved: ") + name + " for passage " + sent.docid);
          return next();
        })
        .catch(function (e) { if (e !== null) { window.location.assign(window.location.pathname); } });
    });
  }

  settled(true);
})();
