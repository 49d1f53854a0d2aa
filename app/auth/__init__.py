"""Who may do what: token keys (keys), token verification (tokens), the authorization rules and
the gate every HTTP request passes (policy, authorizer, gate), and `quire tokens` (cli)."""
