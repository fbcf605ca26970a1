service S extends S {}
