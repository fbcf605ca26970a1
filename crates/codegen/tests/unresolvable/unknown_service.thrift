service S extends Missing {}
