"""The core of grading: an exercise and its settings, a submission checked and graded in a sandbox, the scorecard it gives."""
