"""Running a recipe: the runner, resume ledgers, run-folder storage, remote and Ray execution,
and input fingerprints."""
