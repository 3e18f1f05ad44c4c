"""The post-mortem report: a run's series (:mod:`.series`, core), its model (:mod:`.model`, pure), its charts
(:mod:`.charts`, the ``report`` extra's matplotlib) and the page (:mod:`.page`): one self-contained HTML file."""
