"""Day-2 operations tools (the Grafana dashboard); never imported by the operator."""
