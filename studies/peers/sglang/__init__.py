"""SGLang beside us: its runner, the recorder plugin hooked into its scheduler, the
configurations tried, and ``payload.sh``, which packs its packages for an offline GPU machine."""
