// InsertCellButton view: "Insert below" puts `code` in a new code cell under the cell that ran
// %advise. The click is handled here, in the page, because set_next_input from a widget
// callback only lands after the *next* execution (jupyterlab#8893).
//   JupyterLab 4 / Notebook 7: the widget manager's notebook context -> sharedModel.insertCell
//   nbclassic / Notebook 6:    window.Jupyter.notebook.insert_cell_below
//   anything else (VS Code, Colab, ...): copy the code to the clipboard.
// The code is always shown as text under the button as well.

function sharedNotebook(model) {
  const ctx = model.widget_manager && model.widget_manager.context;
  const nb = ctx && ctx.model && ctx.model.sharedModel;
  return nb && typeof nb.insertCell === "function" ? nb : null;
}

function cellIndexInLab(nb, cellId, el) {
  const cells = Array.from(nb.cells);
  let idx = cellId ? cells.findIndex((c) => c.id === cellId) : -1;
  if (idx < 0) {
    // No cell id (e.g. a front end that does not send it): the windowed list numbers its cells.
    const host = el.closest("[data-windowed-list-index]");
    if (host) idx = Number(host.getAttribute("data-windowed-list-index"));
  }
  return idx >= 0 && idx < cells.length ? idx : cells.length - 1;
}

function insertInLab(model, el, code) {
  const nb = sharedNotebook(model);
  if (!nb) return false;
  const idx = cellIndexInLab(nb, model.get("cell_id"), el);
  nb.insertCell(idx + 1, { cell_type: "code", source: code });
  return true;
}

function insertInClassic(el, code) {
  const J = window.Jupyter;
  if (!(J && J.notebook && typeof J.notebook.insert_cell_below === "function")) return false;
  const cells = J.notebook.get_cells();
  let idx = cells.findIndex((c) => c.element && c.element[0] && c.element[0].contains(el));
  if (idx < 0) idx = J.notebook.ncells() - 1;
  J.notebook.insert_cell_below("code", idx).set_text(code);
  return true;
}

async function copyToClipboard(code) {
  try {
    await navigator.clipboard.writeText(code);
    return "copied";
  } catch (e) {
    return "copy-failed";
  }
}

async function insertOrCopy(model, el) {
  const code = model.get("code");
  if (model.get("mode") !== "copy") {
    try {
      if (insertInLab(model, el, code) || insertInClassic(el, code)) return "inserted";
    } catch (e) {
      console.warn("aiadvisor: inserting a cell failed, copying instead", e);
    }
  }
  return copyToClipboard(code);
}

const DONE_LABEL = {
  inserted: "Inserted below \u2713",
  copied: "Copied to clipboard \u2713",
  "copy-failed": "Select the code below and copy it",
};

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "aiadvisor-insert-root";
  const bar = document.createElement("div");
  bar.className = "aiadvisor-insert-bar";
  const btn = document.createElement("button");
  btn.className = "aiadvisor-insert jupyter-button";
  btn.type = "button";
  btn.title = "Insert this code in a new cell below (copies it where that is not possible)";
  const note = document.createElement("span");
  note.className = "aiadvisor-insert-note";
  const pre = document.createElement("pre");
  pre.className = "aiadvisor-code";

  const sync = () => {
    btn.textContent = model.get("label");
    pre.textContent = model.get("code");
    pre.style.display = model.get("show_code") ? "" : "none";
  };
  btn.addEventListener("click", async () => {
    const status = await insertOrCopy(model, el);
    note.textContent = DONE_LABEL[status] || status;
    model.set("status", status);
    model.set("num_clicks", model.get("num_clicks") + 1);
    model.save_changes();
  });
  const newCode = () => {
    note.textContent = "";  // a new snippet: the last click's outcome no longer applies
    sync();
  };
  model.on("change:label", sync);
  model.on("change:code", newCode);
  model.on("change:show_code", sync);
  sync();
  bar.append(btn, note);
  root.append(bar, pre);
  el.appendChild(root);
  return () => {
    model.off("change:label", sync);
    model.off("change:code", newCode);
    model.off("change:show_code", sync);
  };
}

export default { render };
