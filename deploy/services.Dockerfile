# CI's stand-in for the official postgres, redis and caddy images that docker-compose.yml names: one image
# of Debian's postgresql, redis-server and caddy packages on the base `grader image build` bootstraps
# (no registry is reached in CI). Each service of the stack runs its own command in it;
# deploy/postgres-entrypoint.sh makes the database as the official image's entrypoint does.
ARG BASE
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        postgresql redis-server caddy ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data /config /var/run/postgresql && chown postgres:postgres /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
COPY deploy/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
