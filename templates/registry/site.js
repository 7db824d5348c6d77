// The registry site's one script: index filters, copy buttons, and this registry's URL in the commands.
// Everything works without it: the index then lists every UDM and the commands show a placeholder URL.
(function () {
  "use strict";

  function shellQuote(s) {
    return /^[A-Za-z0-9@%+=:,.\/_-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
  }

  // The registry's root URL (http(s) when served, file: when opened from disk): every command names it.
  var root = new URL(document.body.getAttribute("data-root") || "./", location.href).href;
  document.querySelectorAll(".registry-url").forEach(function (el) { el.textContent = root; });
  var install = document.getElementById("install-line");
  if (install) {
    install.textContent = install.getAttribute("data-install") + " --registry " + shellQuote(root);
  }

  function copyText(text, button) {
    function done(ok) {
      button.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      return;
    }
    var area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    done(ok);
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) { return; }
    button.hidden = false;
    button.addEventListener("click", function () { copyText(source.textContent, button); });
  });

  var form = document.getElementById("filters");
  if (!form) { return; }
  var cards = Array.prototype.slice.call(document.querySelectorAll("#udms > li"));
  var shown = document.getElementById("shown");
  var none = document.getElementById("none");
  var query = form.elements.namedItem("q");
  var boxes = Array.prototype.slice.call(form.querySelectorAll("input[type=checkbox]"));

  // The filters live in the URL (?kind=uda&prop=algebraic&q=...), so a filtered view can be shared.
  var initial = new URLSearchParams(location.search);
  query.value = initial.get("q") || "";
  boxes.forEach(function (box) { box.checked = initial.getAll(box.name).indexOf(box.value) >= 0; });

  function picked(name) {
    return boxes.filter(function (b) { return b.name === name && b.checked; }).map(function (b) { return b.value; });
  }
  function apply() {
    var kinds = picked("kind");
    var props = picked("prop");
    var words = query.value.toLowerCase().split(/\s+/).filter(Boolean);
    var n = 0;
    cards.forEach(function (li) {
      var have = li.getAttribute("data-props").split(" ");
      var text = li.getAttribute("data-search");
      var ok = (kinds.length === 0 || kinds.indexOf(li.getAttribute("data-kind")) >= 0) &&
        props.every(function (p) { return have.indexOf(p) >= 0; }) &&
        words.every(function (w) { return text.indexOf(w) >= 0; });
      li.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n === cards.length ? n + " UDMs" : n + " of " + cards.length + " UDMs";
    none.hidden = n !== 0;
    var state = new URLSearchParams();
    if (query.value.trim()) { state.set("q", query.value.trim()); }
    boxes.forEach(function (b) { if (b.checked) { state.append(b.name, b.value); } });
    var search = state.toString();
    try {
      history.replaceState(null, "", search ? "?" + search : location.pathname);
    } catch (e) { /* file: pages may refuse; the filter still works */ }
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (e) { e.preventDefault(); apply(); });
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  form.hidden = false;
  apply();
}());
