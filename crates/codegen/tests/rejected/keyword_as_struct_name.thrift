struct service {}
