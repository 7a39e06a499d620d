"""A course around the grading: the store of students and submissions, deadlines and terms, gradebooks, batches, the audit of suites, the published site."""
