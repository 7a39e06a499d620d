"""The grading service: accounts and sign-in links, the life of a submission through its queue, and
the ways of running gradings (threads in the web server, or RQ workers on Redis)."""
