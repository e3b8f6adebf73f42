/* The new-study form's Bayesian setting: shown only for Bayesian optimisation, with the number
 * an empty field means for the search space on the page (KerasTuner's default, 3 x the number
 * of hyperparameters) and a warning when every trial would be an initial random one. Without
 * JavaScript the field simply stays visible and the server checks it. */
(function () {
  const form = document.getElementById("study-form");
  const field = document.getElementById("initial-random-field");
  if (!form || !field) return;
  const tuner = form.elements["tuner"];
  const input = form.elements["initial_random_trials"];
  const maxTrials = form.elements["max_trials"];
  const space = form.elements["search_space"];
  const shownDefault = document.getElementById("initial-random-default");
  const warning = document.getElementById("initial-random-warning");

  function hyperparameterCount() {
    try {
      const rows = JSON.parse(space.value);
      return Array.isArray(rows) ? rows.length : 0;
    } catch (error) {
      return 0;  // the editor shows what is wrong with the JSON
    }
  }

  function update() {
    const bayesian = tuner.value === "bayesian";
    field.hidden = !bayesian;
    input.disabled = !bayesian;  // a disabled field is not sent: other tuners never get it
    const fallback = Math.max(3 * hyperparameterCount(), 3);
    shownDefault.textContent = fallback;
    const initial = parseInt(input.value, 10) || fallback;
    const trials = parseInt(maxTrials.value, 10);
    const pureRandom = bayesian && trials > 0 && trials <= initial;
    warning.hidden = !pureRandom;
    warning.textContent = pureRandom
      ? `With ${trials} max trials and ${initial} initial random trials, this study is a random search: ` +
        "raise max trials or set fewer initial random trials."
      : "";
  }

  // The search-space editor rewrites the JSON after its own input handlers run.
  form.addEventListener("input", () => setTimeout(update, 0));
  form.addEventListener("change", () => setTimeout(update, 0));
  form.addEventListener("click", () => setTimeout(update, 0));
  update();
})();
