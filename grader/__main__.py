"""Run the grader as `python -m grader`."""

from grader.cli.main import run

run()
