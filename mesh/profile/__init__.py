"""The other dialect: EMQX's "A2A over MQTT" profile and the A2A 1.0 translation it shares with the gateway."""
