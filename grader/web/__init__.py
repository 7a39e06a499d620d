"""`grader serve`: the web service where students submit and read their reports and instructors
follow the class (Starlette on uvicorn, Jinja pages, no script)."""
