"""Mini-SGLang, the article's code, beside us: its runner, the recorder hooked into its loop, the
configurations tried, and ``prepare.sh``, which packs it for an offline GPU machine."""
