"""Run the grader as `python -m grader`."""

from grader.cli import main

main()
