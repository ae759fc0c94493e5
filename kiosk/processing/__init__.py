"""The processing stage: the inference thread, the stage protocol, the swap pipeline, pipelining, tracking."""
