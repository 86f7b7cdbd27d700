// Loaded after RequireJS and before the ipywidgets HTML manager (nb_ipywidgets_js in _config.yml).
// The manager finds its own assets (icon fonts) relative to the module path
// "@jupyter-widgets/html-manager/dist"; point that path at the folder this file is served from,
// _static/widgets/, where `make` copies the manager from node_modules.
(function () {
  var here = document.currentScript.src.replace(/\/[^/]*$/, "");
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": here } });
})();

// The widget manager typesets widget labels with the MathJax 2 call MathJax.Hub.Queue; the book
// loads MathJax 3. Provide that call on top of MathJax 3 once MathJax has loaded (deferred
// scripts run before DOMContentLoaded; widgets render later, on the load event).
window.addEventListener("DOMContentLoaded", function () {
  var mj = window.MathJax;
  if (mj && !mj.Hub) {
    mj.Hub = {
      Queue: function (job) {
        var element = job && job[2];
        if (element && window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise([element]).catch(function () {});
        }
      },
    };
  }
});
