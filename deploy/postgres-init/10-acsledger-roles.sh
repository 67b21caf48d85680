#!/bin/sh
# Creates acsledger's two logins and its database. The postgres image runs
# this once, as its superuser, when it initialises an empty data directory;
# acsledger itself never connects as a superuser.
#
#   acsledger_owner   owns the database and the schema; `acsledger migrate`
#                     connects as it. NOSUPERUSER; CREATEROLE only so that
#                     the migrations can create the NOLOGIN roles they grant
#                     to (acsledger_eraser).
#   acsledger_writer  the service's login (`acsledger serve`): the migrations
#                     grant it INSERT and SELECT on the evidence and UPDATE
#                     of the chain heads, nothing else. It owns nothing, is
#                     a member of no role, and cannot SET ROLE or RESET ROLE
#                     into the owner, disable a trigger or set
#                     session_replication_role.
#
# The passwords come from the environment (ACSLEDGER_OWNER_PASSWORD,
# ACSLEDGER_WRITER_PASSWORD). Outside docker-compose, run the same
# statements as any role that may create roles and databases.
set -eu
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
	-v owner_password="$ACSLEDGER_OWNER_PASSWORD" \
	-v writer_password="$ACSLEDGER_WRITER_PASSWORD" <<'EOSQL'
CREATE ROLE acsledger_owner LOGIN NOSUPERUSER CREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS PASSWORD :'owner_password';
CREATE ROLE acsledger_writer LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS PASSWORD :'writer_password';
CREATE DATABASE acsledger OWNER acsledger_owner;
EOSQL
