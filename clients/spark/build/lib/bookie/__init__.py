"""Bookie: durable ledger storage server, its wire protocol, and the ledger client."""
