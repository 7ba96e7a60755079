"""Our engine beside SGLang and Mini-SGLang on the same work: one folder a peer (its runner, its
recorder hook, its configurations), and what they share here: the work, the processes, the
runners' common part, the tables (``python -m studies peers``)."""
