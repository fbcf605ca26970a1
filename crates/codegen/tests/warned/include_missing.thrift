include "nowhere.thrift"
