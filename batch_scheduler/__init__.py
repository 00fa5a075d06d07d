"""The periodic batch scheduler: Volcano's session, actions and plugins (arrives with the batch issue)."""
