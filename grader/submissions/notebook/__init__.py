"""Notebooks as submissions: lecture-style cells become the exercise functions the grader grades."""

from grader.submissions.notebook.convert import history_sources, notebook_sources, sources_from_cells

__all__ = ["history_sources", "notebook_sources", "sources_from_cells"]
