-- wb.explain: `workbench explain TRACE.json [--json]`, the findings of a Chrome trace the
-- workbench wrote (the reading is wb.findings_trace's, the rules wb.findings').

return {main = require("wb.findings_trace").explain_main}
