"""The published MD5 sums of the image datasets' files (cs.toronto.edu for CIFAR-10, zalandoresearch for
Fashion-MNIST): the vision host's catalogue entries and the CIFAR reader check them. Imports nothing."""

CIFAR_MD5 = {"data_batch_1": "c99cafc152244af753f735de768cd75f", "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
             "data_batch_3": "54ebc095f3ab1f0389bbae665268c751", "data_batch_4": "634d18415352ddfa80567beed471001a",
             "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb", "test_batch": "40351d587109b95175f43aff81a1287e",
             "batches.meta": "5ff9c542aee3614f3951f8cda6e48888"}  # fmt: skip
FASHION_MD5 = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
               "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
               "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
               "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}  # fmt: skip
