"""What people see: a stored run read into tables, the charts (drawn only in :mod:`flare_core.view.figures`,
for the dashboard pages and the HTML report alike), the report and the glossary of every figure."""
