"""The diagnosis out: OTel gauges and events, the snapshot the API and the dashboard share, and the job's life
kept on disk for the next daemon (:mod:`.life_state`)."""
