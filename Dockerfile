# Images for docker-compose.yml: the broker, the follower simulator, and a kcat client.
# Everything is built from this repository; nothing is pulled but the base images.

# ---- build: compile the workspace's two binaries -------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p purgatory -p followersim --bins

# ---- broker: the `purgatory` broker (and `followersim`, same image) ------------------
FROM debian:bookworm-slim AS broker
COPY --from=builder /src/target/release/purgatory /usr/local/bin/purgatory
COPY --from=builder /src/target/release/followersim /usr/local/bin/followersim
COPY config /etc/purgatory
WORKDIR /etc/purgatory/..
EXPOSE 9092 8080
ENTRYPOINT ["purgatory"]
CMD ["serve", "--config", "/etc/purgatory/broker.toml"]

# ---- followersim: a simulated follower replica ---------------------------------------
FROM broker AS followersim
ENTRYPOINT ["followersim"]

# ---- kcat: a real Kafka client to produce with ---------------------------------------
FROM debian:bookworm-slim AS kcat
RUN apt-get update && apt-get install -y --no-install-recommends kcat && rm -rf /var/lib/apt/lists/*
ENTRYPOINT ["kcat"]
