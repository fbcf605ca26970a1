struct StoreReply {}
service Store {}
