"""Run the grader as `python -m grader`."""

from grader.cli import run

run()
