"""The diagnosis out: OTel gauges and events, and the snapshot the API and the dashboard share."""
