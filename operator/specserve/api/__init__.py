"""The SpecServe API: models (the source of truth), cross-field rules, and the CRD generated from them."""
