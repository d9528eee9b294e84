"""Check with a few labels: name the categories, label the texts the product chooses, and watch the answer
settle; or, for search, check with a few searches: type queries and tick the documents that answer them. The
labels and judgements are saved with the run after each batch (they survive a restart, travel in bundles and
appear in the report)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import current_run, escape, show_labels_table, show_verdict, status_banner
from dashboard.session import current_access
from flare_core.answer import few_judgements as fj
from flare_core.answer import from_judgements
from flare_core.answer import labels as label_store
from flare_core.answer.from_labels import BATCH_SIZE, few_label_history, next_texts
from flare_core.answer.stored import load_verdict
from flare_core.answer.write import run_few_label_prior, write_verdict
from flare_core.run.jobs import effective_status
from flare_core.view import answer_figures
from flare_core.view.passages import passage
from flare_core.view.verdict import labels_table, map_drawing_words

#: The choice for a text the person cannot or will not label (never a category: the store refuses it).
SKIP = label_store.SKIP

#: The page's title for each way of checking.
TITLES = {False: "Check with a few labels", True: "Check with a few searches"}
SEARCH_CHOICE, LABEL_CHOICE = "search queries", "categories of texts"

title = st.empty()  # the title says which check this is, once the run is known
run = current_run()
if run is None:
    title.title(TITLES[False])
    st.stop()
judged = fj.load_search_judgements(run)
labels = label_store.load_labels(run)
access = current_access()
editable = access.allows("label", run.id)


def searching_by_default() -> bool:
    """Whether this run is checked with searches unless its owner picks otherwise: its use is search, or
    queries were judged and no text labelled."""
    use = str(run.manifest.get("params", {}).get("use") or "unsure")
    return use == "search" or (fj.has_search_judgements(run) and not labels.entries)


chosen = st.session_state.get(f"mode-{run.id}") if editable else None
searching = chosen == SEARCH_CHOICE if chosen else searching_by_default()
title.title(TITLES[searching])
status_banner(run)
corpus = run.manifest["corpus"]
if corpus.get("has_labels"):
    st.success(
        f"This run has labels of its own (column '{escape(corpus.get('label_column'))}'): the answer on the "
        "Overview comes from all of them, so there is nothing to add here.",
        icon=":material/task_alt:",
    )
    st.stop()
if not any(m.get("status") == "done" and m.get("role") == "candidate" for m in run.manifest["models"]):
    st.info("Labelling starts once the models have read your texts.")
    st.stop()
drawing = map_drawing_words(run.manifest, effective_status(run), answered=load_verdict(run) is not None)
if drawing:
    st.caption(escape(drawing))
if searching and editable:
    st.markdown(
        "A few searches settle which model finds what you look for in *your* documents. Type a query you "
        "would search for (or pick one drafted from your texts), then read the documents the models find "
        "and tick those that answer it: after each query the chances below are updated, and the answer "
        "tells you when more searches would no longer change it."
    )
elif searching:
    st.markdown(
        "A few searches settle which model finds what people look for in these documents. This page shows "
        "what the searches judged for this run say so far; only the run's owner can add searches."
    )
elif editable:
    st.markdown(
        "A few labels settle which model is best for *your* texts. Name the categories, then label the "
        "texts the product picks, a batch at a time: after each batch the chances below are updated, and "
        "the answer tells you when more labels would no longer change it."
    )
else:
    st.markdown(
        "A few labels settle which model is best for these texts. This page shows what the labels given to "
        "this run say so far; only the run's owner can add labels."
    )


def categories_step() -> None:
    st.subheader("1. The categories", divider="gray")
    if not editable:
        st.caption(f"Categories: {escape(', '.join(labels.categories) or 'none yet')}")
        return
    typed = st.text_input(
        "Categories, separated by commas",
        value=", ".join(labels.categories),
        key=f"categories-{run.id}",
        placeholder="for example: complaint, question, praise",
        help="The kinds of text you want the model to tell apart. At least two.",
    )
    if st.button("Save the categories", key="save-categories"):
        access.require("label", run.id)
        try:
            label_store.set_categories(run, [c for c in typed.split(",") if c.strip()])
        except ValueError as exc:
            st.error(escape(exc))
        else:
            st.rerun()
    if labels.categories:
        with st.expander("Rename a category (its labels follow)"):
            old = st.pills("Category", labels.categories, format_func=escape, key="rename-old")
            new = st.text_input("New name", key="rename-new")
            if st.button("Rename", key="rename") and new.strip() and old is not None:
                access.require("label", run.id)
                try:
                    label_store.rename_category(run, old, new)
                except ValueError as exc:
                    st.error(escape(exc))
                else:
                    write_verdict(run)
                    st.rerun()


def batch_step() -> None:
    st.subheader("2. Label a batch", divider="gray")
    if len(labels.categories) < 2:
        st.info("Name at least two categories to start labelling.")
        return
    said = st.container()  # always drawn, so that what follows keeps its place when it is empty
    for note in st.session_state.pop(f"label-notes-{run.id}", []):
        said.warning(escape(note), icon=":material/info:")
    size = st.select_slider("Texts in this batch", options=[8, 12, 16], value=BATCH_SIZE, key="batch-size")
    drawn = drawn_batch(size)
    batch = drawn["texts"]
    if batch.empty:
        if len(labels.rows) + len(labels.skipped_rows) >= int(run.manifest["corpus"]["n_texts"]):
            st.success("Every text of this run is labelled or skipped.")
        else:
            st.success("Every text left repeats, or nearly repeats, one already labelled or skipped.")
        return
    st.caption(
        f"{len(labels.labels)} texts labelled so far in {labels.batches} batch(es); "
        f"{len(labels.skipped_rows)} skipped. Read each text and pick its category, or {SKIP} when you "
        "cannot tell; a text left without a choice is asked again later."
    )
    meanwhile = sorted(set(batch["row"].tolist()) & set(labels.latest()))
    if meanwhile:
        said.info(
            f"{len(meanwhile)} of these texts were labelled meanwhile (in another tab or with flare label): "
            "a different label you give them here is not saved, and the page says so.",
            icon=":material/group:",
        )
        if said.button("Show other texts instead", key="redraw"):
            st.session_state.pop(f"batch-{run.id}", None)
            st.rerun()
    with st.form(key=f"batch-form-{run.id}-{drawn['id']}", border=False):
        chosen = {}
        for n, item in enumerate(batch.itertuples(index=False), start=1):
            row = int(item.row)
            with st.container(border=True, key=f"text-{n}"):
                st.caption(f"Text {n} · row {row} of your corpus")
                whole_text(str(item.text))
                chosen[row] = st.pills(
                    f"Category of text {n}",
                    list(dict.fromkeys([*labels.categories, SKIP])),  # a category of an older run
                    format_func=escape,
                    key=f"pick-{run.id}-{drawn['id']}-{row}",
                    label_visibility="collapsed",
                )
        saving = st.form_submit_button("Save the labels of this batch", type="primary")
    if saving:
        save_labels({r: v for r, v in chosen.items() if v is not None}, drawn["seen"])


def drawn_batch(size: int) -> dict:
    """The texts this tab shows, drawn once and kept until this tab saves them (another tab's save, or a
    candidate embedded meanwhile, does not change the texts under a person's choices), with the labels'
    revision when they were drawn."""
    key, count = f"batch-{run.id}", f"batches-drawn-{run.id}"
    drawn = st.session_state.get(key)
    if drawn is None or drawn["size"] != size:
        st.session_state[count] = number = st.session_state.get(count, 0) + 1  # fresh choices for new texts
        drawn = {"id": number, "size": size, "seen": labels.revision, "texts": next_texts(run, labels, size)}
        st.session_state[key] = drawn
    return drawn


def whole_text(text: str, shown: int = 1200) -> None:
    """A text in full, wrapped; a long one opens whole under its beginning."""
    if len(text) <= shown:
        st.markdown(escape(text))
        return
    cut = text[:shown].rsplit(" ", 1)[0]
    st.markdown(escape(cut + " …"))
    with st.expander(f"Show the whole text ({len(text.split()):,} words)"):
        st.markdown(escape(text))


def save_labels(given: dict[int, str], seen: int | None) -> None:
    """Save the person's choices (a correction included); what was not saved, corrected or mapped is said
    on the page after it reloads."""
    if not given:
        st.error("Pick a category for at least one text, then save.")
        return
    access.require("label", run.id)
    labelled = {r: v for r, v in given.items() if v != SKIP}
    skipped = [r for r, v in given.items() if v == SKIP]
    try:
        saved = label_store.save_batch(run, labelled, skipped=skipped, source="page", seen=seen)
    except ValueError as exc:
        st.error(f"Nothing was saved: {escape(exc)}")
        return
    write_verdict(run)
    st.session_state[f"label-notes-{run.id}"] = saved.notes()
    if seen is not None:
        st.session_state.pop(f"batch-{run.id}", None)  # the next batch is drawn from the labels now
    done = len(labelled) - len(saved.not_saved)
    st.toast(f"Saved {done} label(s) and {len(skipped)} skipped text(s).")
    st.rerun()


def correct_step() -> None:
    """Correct a saved label: pick the text, read it whole, pick its right category."""
    latest = labels.latest()
    if not latest:
        return
    with st.expander("Correct a saved label", expanded=bool(st.session_state.get(f"correcting-{run.id}"))):
        texts = run.corpus_frame()["text"]
        rows = list(reversed(latest))  # the latest labelled first
        row = st.selectbox(
            "Text",
            rows,
            format_func=lambda r: f"row {r} · {latest[r]} · {shorten(str(texts.iloc[r]))}",
            key=f"correct-row-{run.id}",
        )
        whole_text(str(texts.iloc[row]))
        st.caption(f"Saved as {escape(latest[row])}.")
        right = st.pills(
            "Its right category",
            [c for c in labels.categories if c != latest[row]],
            format_func=escape,
            key=f"correct-to-{run.id}-{row}",
        )
        if st.button("Save the correction", key="save-correction", disabled=right is None):
            st.session_state[f"correcting-{run.id}"] = True
            save_labels({int(row): str(right)}, None)


def shorten(text: str, most: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[: most - 1].rsplit(" ", 1)[0] + " …"


@st.cache_data(show_spinner=False, max_entries=8)
def history(run_id: str, entries: int) -> pd.DataFrame:
    return few_label_history(run, labels, run_few_label_prior(run))


def answer_step() -> None:
    st.subheader("3. What your labels say", divider="gray")
    if not labels.entries:
        st.info("The chances appear after the first batch.")
        return
    show_verdict(run, container_key="labels-verdict", link_labels=False)  # this page: no link to itself
    verdict = load_verdict(run) or {}
    table = labels_table(verdict)
    if not table.empty:
        show_labels_table(table)
    counts = labels.counts()
    st.caption("Labels per category: " + escape(", ".join(f"{c}: {n}" for c, n in counts.items())))
    past = history(run.id, len(labels.entries))
    if past["n_labels"].nunique() > 1:
        st.plotly_chart(answer_figures.chance_history(past), key="chances")


def search_mode() -> bool:
    """Whether this page judges search queries (the run's use is search, or queries were judged and no text
    labelled), or labels categories; the owner may switch."""
    default = searching_by_default()
    if not editable:
        return default
    choice = st.radio(
        "Check with",
        [LABEL_CHOICE, SEARCH_CHOICE],
        index=1 if default else 0,
        horizontal=True,
        key=f"mode-{run.id}",
        help="Categories: label texts by kind. Search queries: give a few queries and mark which of the "
        "documents the models find answer them.",
    )
    return choice == SEARCH_CHOICE


@st.cache_data(show_spinner=False, max_entries=8)
def drafted(run_id: str, n_queries: int) -> pd.DataFrame:
    return from_judgements.draft_queries(run, 5, judged)


def queries_step() -> None:
    st.subheader("1. Your queries", divider="gray")
    if st.session_state.pop(f"added-{run.id}", False):
        st.session_state[f"query-{run.id}"] = ""  # the query added leaves the box
    typed = st.text_input(
        "Type a query", key=f"query-{run.id}", placeholder="for example: how do I reset my password"
    )
    if st.button("Add the query", key="add-query") and typed.strip():
        access.require("label", run.id)
        try:
            with st.spinner("The models are reading your query…"):
                (added,) = fj.add_queries(run, [typed], source="typed")
        except ValueError as exc:
            st.error(escape(exc))
        else:
            st.session_state[f"focus-{run.id}"] = added
            st.session_state[f"added-{run.id}"] = True
            st.rerun()
    drafts = drafted(run.id, len(judged.ids))
    if not drafts.empty:
        pick = st.selectbox(
            "Or pick a query drafted from your texts (a document's first sentence)",
            drafts["query"].tolist(),
            key=f"draft-{run.id}-{len(judged.ids)}",
        )
        if st.button("Add this query", key="add-draft"):
            access.require("label", run.id)
            row = int(drafts.loc[drafts["query"] == pick, "known_item_row"].iloc[0])
            try:
                with st.spinner("The models are reading the query…"):
                    (added,) = fj.add_queries(run, [pick], source="suggested", known_items=[row])
            except ValueError as exc:
                st.error(escape(exc))
            else:
                st.session_state[f"focus-{run.id}"] = added
                st.rerun()


def judge_step() -> None:
    st.subheader("2. Mark what answers it", divider="gray")
    if not judged.ids:
        st.info("Add a query to start.")
        return
    pending = judged.pending()
    focus = st.session_state.get(f"focus-{run.id}")
    start = focus if focus in judged.ids else (pending or judged.ids)[0]
    query = st.selectbox(
        "Query",
        judged.ids,
        index=judged.ids.index(start),
        format_func=lambda q: f"{q}: {judged.text(q)}" + ("" if q in pending else " (judged)"),
        key=f"judge-query-{run.id}-{len(judged.ids)}-{judged.batches}",
    )
    every = bool(st.session_state.get(f"every-{run.id}-{query}"))
    docs = fj.pooled_documents(run, [query], judged, every=every)
    found = len(judged.pool(query))
    st.caption(
        f"{len(docs)} documents: those the models rank highest for this query, in a shuffled order that "
        "does not say which model found which. Read each one (its passage nearest your words first) and "
        "tick those that answer the query. A document left unticked counts as not relevant, and so does "
        "one nobody judged."
    )
    if len(docs) < found and st.button(f"Show all {found} documents the models found", key="every-doc"):
        st.session_state[f"every-{run.id}-{query}"] = True
        st.rerun()
    ticked = pooled_list(docs, query)
    relevant = sum(ticked.values())
    if st.button(
        f"Save the judgements of {escape(query)} ({relevant} relevant)", type="primary", key="save-judgements"
    ):
        access.require("label", run.id)
        given = [(query, row, int(answers)) for row, answers in ticked.items()]
        try:
            fj.add_judgements(run, given, source="page")
        except ValueError as exc:
            st.error(f"Nothing was saved: {escape(exc)}")
        else:
            write_verdict(run)
            st.session_state[f"focus-{run.id}"] = query  # the picker stays on the query just judged
            st.toast(f"Saved {len(given)} judgement(s) of {escape(query)}, {relevant} relevant.")
            st.rerun()


def pooled_list(docs: pd.DataFrame, query: str) -> dict[int, bool]:
    """Each document of ``query`` to judge, as its passage nearest the query's words (the whole document
    under "Show all"), with a box to tick when it answers the query (ticked when it was judged relevant
    before); returns each document's row and whether it is ticked."""
    ticked = {}
    for n, doc in enumerate(docs.itertuples(index=False), start=1):
        row = int(doc.doc_row)
        with st.container(border=True, key=f"pooled-{n}"):
            st.caption(f"Document {n} · row {row} of your corpus")
            short, cut = passage(str(doc.text), judged.text(query))
            st.markdown(escape(short))
            if cut:
                with st.expander("Show all"):
                    st.markdown(escape(doc.text))
            ticked[row] = st.checkbox(
                f"Document {n} answers the query",
                value=str(doc.relevant) not in ("", "0"),
                key=f"pool-{run.id}-{query}-{judged.batches}-{row}",
            )
    return ticked


@st.cache_data(show_spinner=False, max_entries=8)
def search_history(run_id: str, entries: int) -> pd.DataFrame:
    return from_judgements.search_history(run, judged)


def search_answer_step() -> None:
    st.subheader("3. What your judgements say", divider="gray")
    if not judged.judged:
        st.info("The chances appear after the first judged query.")
        return
    show_verdict(run, container_key="labels-verdict", link_labels=False)
    verdict = load_verdict(run) or {}
    table = labels_table(verdict)
    if not table.empty:
        show_labels_table(table)
    if judged.no_relevant:
        st.caption(
            "No document marked relevant (kept, not counted until one is): "
            + escape(", ".join(judged.no_relevant))
        )
    past = search_history(run.id, len(judged.entries))
    if past["n_labels"].nunique() > 1:
        st.plotly_chart(
            answer_figures.chance_history(
                past, "Chance of being the best, judged query by judged query", counted="judged queries"
            ),
            key="chances",
        )


if search_mode():
    if editable:
        queries_step()
        judge_step()
    search_answer_step()
else:
    categories_step()
    if editable:
        batch_step()
        correct_step()
    answer_step()
