"""`kilocard rehearse`: a month of failures on a model of the fleet, before it happens."""
