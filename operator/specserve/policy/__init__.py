"""Pure decisions shared by the operator and the measuring tools."""
