/* The new-study form's Bayesian setting: shown only for Bayesian optimisation, with the number
 * an empty field means for the search space and budget on the page (3 x the number of
 * hyperparameters, at most a quarter of max trials, at least 3) and a warning when every trial would be an initial random one. Without
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
    const bayesian = ["bayesian", "optuna_tpe", "optuna_gp"].includes(tuner.value);  // tuning/tuners.py GUIDED_TUNERS
    field.hidden = !bayesian;
    input.disabled = !bayesian;  // a disabled field is not sent: other tuners never get it
    const trials = parseInt(maxTrials.value, 10);
    // experiments/tuning/space_values.py's default_initial_random_trials
    const byBudget = trials > 0 ? Math.floor(trials / 4) : Infinity;
    const fallback = Math.max(Math.min(3 * hyperparameterCount(), byBudget), 3);
    shownDefault.textContent = fallback;
    const initial = parseInt(input.value, 10) || fallback;
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

/* Hypermodels that do not fit the chosen dataset's kind are greyed out with the reason; the
 * server refuses them anyway. */
(function () {
  const form = document.getElementById("study-form");
  const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "{}");
  if (!form) return;
  const datasetKinds = read("dataset-kinds");
  const hypermodelKinds = read("hypermodel-kinds");
  const dataset = form.elements["dataset"];
  const hypermodel = form.elements["hypermodel"];
  const note = document.getElementById("hypermodel-fit");
  const names = { tabular: "tabular rows", image: "images", text: "text", sequence: "sequences" };
  if (!dataset || !hypermodel || !note) return;

  function update() {
    const kind = datasetKinds[dataset.value];
    const unfit = [];
    for (const option of hypermodel.options) {
      const kinds = hypermodelKinds[option.value] || [];
      const fits = !kind || kinds.includes(kind);
      option.disabled = !fits;
      option.title = fits ? "" : `Takes ${kinds.map((k) => names[k] || k).join(", ")}; this dataset holds ${names[kind]}.`;
      if (!fits) unfit.push(`${option.value} (takes ${kinds.map((k) => names[k] || k).join(", ")})`);
    }
    if (hypermodel.selectedOptions[0]?.disabled) {
      // A hypermodel made for this kind first (dense also takes flattened images).
      const enabled = [...hypermodel.options].filter((option) => !option.disabled);
      const first = enabled.find((option) => (hypermodelKinds[option.value] || [])[0] === kind) || enabled[0];
      if (first) {
        hypermodel.value = first.value;
        hypermodel.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }
    note.textContent = kind && unfit.length
      ? `This dataset holds ${names[kind]}; not offered: ${unfit.join("; ")}.` : "";
  }

  dataset.addEventListener("change", update);
  update();
})();

/* The objective metric: for a built-in hypermodel, a select of the metrics it reports on the
 * chosen dataset's task; for a team hypermodel, free text. The direction "auto" is inferred from
 * the metric the way the server infers it. The server checks the metric either way. */
(function () {
  const form = document.getElementById("study-form");
  const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "null");
  if (!form || !form.elements["objective_metric"]) return;
  const datasetTasks = read("dataset-tasks") || {};
  const taskMetrics = read("task-metrics") || {};
  const builtins = read("builtin-hypermodels") || [];
  const dataset = form.elements["dataset"];
  const hypermodel = form.elements["hypermodel"];
  const direction = form.elements["objective_direction"];
  const inferred = document.getElementById("direction-inferred");
  const maximised = /acc|auc|precision|recall|f1|r2/i;

  function replace(old, tag) {
    const element = document.createElement(tag);
    for (const name of ["id", "name", "class", "aria-describedby", "aria-invalid"]) {
      if (old.hasAttribute(name)) element.setAttribute(name, old.getAttribute(name));
    }
    old.replaceWith(element);
    return element;
  }

  function metricsFor(task) {
    if (taskMetrics[task]) return taskMetrics[task];
    return [...new Set(Object.values(taskMetrics).flat())];
  }

  function update() {
    let field = form.elements["objective_metric"];
    const value = field.value;
    if (builtins.includes(hypermodel.value)) {
      const metrics = metricsFor(datasetTasks[dataset.value]);
      if (field.tagName !== "SELECT") field = replace(field, "select");
      const shown = [...field.options].map((o) => o.value);
      if (shown.join() !== metrics.join()) {
        field.replaceChildren(...metrics.map((m) => new Option(m, m)));
      }
      field.value = metrics.includes(value) ? value : metrics[0];
    } else if (field.tagName === "SELECT") {
      field = replace(field, "input");
      field.type = "text";
      field.maxLength = 50;
      field.placeholder = "e.g. val_loss";
      field.value = value;
    }
    if (inferred) {
      const metric = field.value.trim();
      inferred.textContent = direction && direction.value === "auto" && metric
        ? `${metric} will be ${maximised.test(metric) ? "maximised" : "minimised"}.` : "";
    }
  }

  dataset.addEventListener("change", update);
  hypermodel.addEventListener("change", update);
  form.addEventListener("change", (event) => { if (event.target.name !== "dataset" && event.target.name !== "hypermodel") update(); });
  form.addEventListener("input", (event) => { if (event.target.name === "objective_metric") update(); });
  update();
})();

/* The chosen hypermodel's description, under its name: the options are short names, since a
 * paragraph in a dropdown is cut off. */
(function () {
  const form = document.getElementById("study-form");
  const shown = document.getElementById("hypermodel-description");
  const source = document.getElementById("hypermodel-descriptions");
  if (!form || !shown || !source || !form.elements["hypermodel"]) return;
  const descriptions = JSON.parse(source.textContent);
  const hypermodel = form.elements["hypermodel"];
  const update = () => { shown.textContent = descriptions[hypermodel.value] || ""; };
  hypermodel.addEventListener("change", update);
  update();
})();
